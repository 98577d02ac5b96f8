// Package htdocs is the live-view web page (index.html, app.js, style.css),
// embedded in the daemon so it needs no web server, no build step and no
// network: the API serves these files at / and the page talks to /api/v1.
package htdocs

import "embed"

// Files holds the page. Only the files listed here are embedded: test/
// (the browser test) stays out of the binary.
//
//go:embed index.html app.js style.css
var Files embed.FS
