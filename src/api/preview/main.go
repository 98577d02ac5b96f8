// Command preview serves the live view and API against the simulated
// daemon of package apifake, for working on the page and for the browser
// test without a router:
//
//	go run ./src/api/preview -listen 127.0.0.1:9099
//
// It prints the page's URL with the token in the fragment. Loopback only.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"surflare-watchdog/src/api"
	"surflare-watchdog/src/api/apifake"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9099", "loopback address:port to serve on")
	token := flag.String("token", "", "bearer token to accept (default: a random one, printed)")
	period := flag.Duration("period", 3*time.Second, "simulated health check period")
	breakEvery := flag.Int("break-every", 8, "break the current node every N checks (0 = never)")
	var origins []string
	flag.Func("allow-origin", "extra websocket origin (scheme://host:port), repeatable; e.g. a LuCI test page", func(o string) error {
		origins = append(origins, o)
		return nil
	})
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("subsystem", "preview")
	if ap, err := netip.ParseAddrPort(*listen); err != nil || !ap.Addr().IsLoopback() {
		fmt.Fprintf(os.Stderr, "preview: -listen %q: want a loopback address:port such as 127.0.0.1:9099\n", *listen)
		os.Exit(2)
	}
	tokens := api.NewTokens(nil)
	tok := *token
	if tok == "" {
		tok = tokens.MintScoped(api.ScopeWrite, 24*time.Hour) // the preview is its own operator
	} else if err := tokens.AddStatic(tok); err != nil {
		fmt.Fprintf(os.Stderr, "preview: -token: %v\n", err)
		os.Exit(2)
	}
	fake := apifake.New(nil, "", nil)
	srv, err := api.NewServer(api.Options{Backend: fake, Tokens: tokens, Listen: *listen, Logger: log, AllowedOrigins: origins})
	if err != nil {
		fmt.Fprintf(os.Stderr, "preview: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go fake.Run(ctx, *period, *breakEvery)
	fmt.Printf("open http://%s/#token=%s\n", *listen, tok)
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "preview: %v\n", err)
		os.Exit(1)
	}
}
