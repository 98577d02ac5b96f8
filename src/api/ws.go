package api

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// Websocket timing, after the gorilla chat example.
const (
	// writeWait is how long one frame may take to write.
	writeWait = 10 * time.Second
	// pongWait is how long the peer may stay silent (pongs included).
	pongWait = 60 * time.Second
	// pingPeriod must be shorter than pongWait.
	pingPeriod = pongWait * 9 / 10
	// maxMessageSize: clients have nothing to say beyond control frames.
	maxMessageSize = 512
)

// Websocket authentication. Browsers cannot set headers on a websocket, and
// a token in the URL query would end up in logs and history, so the page
// offers two subprotocols: Subprotocol, which the server selects and
// echoes, and TokenProtocolPrefix+token, which carries the credential and
// is never echoed. Non-browser clients may use the Authorization header.
const (
	// Subprotocol is the live-stream protocol the server speaks.
	Subprotocol = "surflare.v1"
	// TokenProtocolPrefix precedes the token in the offered subprotocols.
	TokenProtocolPrefix = "bearer."
)

// newUpgrader builds the upgrader with the server's origin check.
func (s *Server) newUpgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize:   1024,
		WriteBufferSize:  4096,
		HandshakeTimeout: writeWait,
		Subprotocols:     []string{Subprotocol},
		CheckOrigin:      s.checkOrigin,
	}
}

// checkOrigin accepts the same origin, the configured allowlist, and (with
// AllowHostWebUI) the router's own web interface on the same host at the
// default port, which is where LuCI runs. A request without Origin is not
// from a browser; it still needed a token to get here.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	if s.origins[normalizeOrigin(u)] {
		return true
	}
	if s.opts.AllowHostWebUI && u.Port() == "" {
		host := r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
		return strings.EqualFold(u.Hostname(), strings.Trim(host, "[]"))
	}
	return false
}

// normalizeOrigin is scheme://host[:port] in lower case, without the
// scheme's default port, so "HTTP://Router.lan:80" matches "http://router.lan".
func normalizeOrigin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if port != "" && !(scheme == "http" && port == "80") && !(scheme == "https" && port == "443") {
		host += ":" + port
	}
	return scheme + "://" + host
}

// serveWS upgrades an authenticated request and streams to it: first one
// snapshot frame with the status, nodes and recent events, then every
// published frame.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !s.hub.running.Load() || s.hub.nClients.Load() >= maxClients {
		s.writeError(w, http.StatusServiceUnavailable, "live stream unavailable; poll /api/v1/status")
		return
	}
	conn, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.log.Debug("Websocket upgrade refused", "remote", r.RemoteAddr, "err", err)
		return // the upgrader has answered
	}
	c := &client{send: make(chan []byte, clientBuffer)}
	if !s.hub.join(r.Context(), c) {
		conn.Close()
		return
	}
	// Joined first so nothing published meanwhile is lost; the hello may
	// repeat an event that is also queued, which the page ignores.
	hello := s.snapshotFrame(r.Context(), true)
	conn.SetWriteDeadline(time.Now().Add(writeWait))
	if err := conn.WriteMessage(websocket.TextMessage, hello); err != nil {
		s.hub.leave(c)
		conn.Close()
		return
	}
	go s.writePump(conn, c)
	go s.readPump(conn, c)
}

// readPump is the connection's only reader: it handles pongs and close
// frames and discards anything else; it unregisters the client at the end.
func (s *Server) readPump(conn *websocket.Conn, c *client) {
	defer func() {
		s.hub.leave(c)
		conn.Close()
	}()
	conn.SetReadLimit(maxMessageSize)
	conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error {
		return conn.SetReadDeadline(time.Now().Add(pongWait))
	})
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			return
		}
	}
}

// writePump is the connection's only writer: frames from the hub, one
// JSON message each, and pings. It ends when the hub closes c.send (the
// client was dropped or the server stops) or a write fails.
func (s *Server) writePump(conn *websocket.Conn, c *client) {
	ticker := time.NewTicker(pingPeriod)
	defer func() {
		ticker.Stop()
		conn.Close()
	}()
	for {
		select {
		case frame, ok := <-c.send:
			conn.SetWriteDeadline(time.Now().Add(writeWait))
			if !ok {
				conn.WriteMessage(websocket.CloseMessage,
					websocket.FormatCloseMessage(websocket.CloseGoingAway, "reconnect"))
				return
			}
			if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
				return
			}
		case <-ticker.C:
			conn.SetWriteDeadline(time.Now().Add(writeWait))
			if err := conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		}
	}
}
