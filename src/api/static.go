package api

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"surflare-watchdog/htdocs"
)

// contentSecurityPolicy allows only the page's own files and its own
// origin's API and websocket: no inline script, nothing from elsewhere.
// Older browsers do not let 'self' cover ws:, hence the explicit host.
func contentSecurityPolicy(host string) string {
	connect := "'self'"
	if host != "" && strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") == "" {
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src " + connect + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// staticRoutes serves the embedded live view at PublicPaths, without a
// token: the files are the same for everyone and hold no data.
func (s *Server) staticRoutes(r chi.Router) {
	for _, p := range PublicPaths {
		name := strings.TrimPrefix(p, "/")
		if name == "" {
			name = "index.html"
		}
		r.Get(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Security-Policy", contentSecurityPolicy(r.Host))
			http.ServeFileFS(w, r, htdocs.Files, name)
		})
	}
}
