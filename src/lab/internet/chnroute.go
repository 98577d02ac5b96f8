package internet

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"surflare-watchdog/src/lab"
)

// The lab's stand-in for the registry's delegated file: the domestic web
// server answers lab.ChnroutePath with the lab's domestic prefixes in APNIC
// delegated format, so a daemon whose chnroute refresher runs in the lab
// downloads from a lab host and never from ftp.apnic.net.

// chnrouteForeign is a non-CN record the file also carries, so a parser
// that ignored the country would show it.
var chnrouteForeign = netip.MustParsePrefix("198.18.20.0/24")

// APNICFile renders cn as an APNIC delegated-format file: a version line,
// a summary, one CN record per prefix (IPv4 as start|count, IPv6 as
// start|length) and one US record.
func APNICFile(cn []netip.Prefix) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# lab delegated file (src/lab/internet/chnroute.go)\n")
	fmt.Fprintf(&b, "2|apnic|20260101|%d|19830613|20260101|+1000\n", len(cn)+1)
	fmt.Fprintf(&b, "apnic|*|ipv4|*|%d|summary\n", len(cn)+1)
	rec := func(cc string, p netip.Prefix) {
		p = p.Masked()
		if p.Addr().Is4() {
			fmt.Fprintf(&b, "apnic|%s|ipv4|%s|%d|20260101|allocated\n", cc, p.Addr(), uint64(1)<<(32-p.Bits()))
		} else {
			fmt.Fprintf(&b, "apnic|%s|ipv6|%s|%d|20260101|allocated\n", cc, p.Addr(), p.Bits())
		}
	}
	for _, p := range cn {
		rec("CN", p)
	}
	rec("US", chnrouteForeign)
	return b.String()
}

// domesticHandler is the domestic web server: the delegated file at
// lab.ChnroutePath, the caller's address (like an IP-echo host) elsewhere.
func (s *Servers) domesticHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+lab.ChnroutePath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, APNICFile(s.cfg.Chnroute))
	})
	mux.Handle("/", s.echoHandler())
	return mux
}
