package internet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/lab"
)

// The search host's generate_204 over TLS. The daemon's shipped 503 probe
// asks an https:// URL (a handshake through the tunnel every 2 s); a lab
// that answers it only over http measures a cheaper daemon than a router
// runs. At start the internet makes a CA in memory (ECDSA P-256, like the
// real sites) and a leaf for the search host's addresses, and writes the
// CA certificate to Config.CAFile for the daemon to trust (SSL_CERT_FILE).

// labTLS is the CA's PEM and the server certificate it issued.
type labTLS struct {
	caPEM []byte
	leaf  tls.Certificate
}

// newLabTLS issues a CA and a leaf for ips and names, valid from an hour
// ago (clock skew between namespaces is nil, but a lab lives for days at
// most) for 30 days.
func newLabTLS(ips []netip.Addr, names []string, now time.Time) (labTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return labTLS{}, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		return n
	}
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "surflare lab CA", Organization: []string{"surflare-lab"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return labTLS{}, err
	}
	ca, err = x509.ParseCertificate(caDER)
	if err != nil {
		return labTLS{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return labTLS{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "lab search"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
	}
	for _, a := range ips {
		leaf.IPAddresses = append(leaf.IPAddresses, a.AsSlice())
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return labTLS{}, err
	}
	return labTLS{
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		// The chain a real site sends: leaf and intermediate (here the CA).
		leaf: tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key},
	}, nil
}

// writeFileAtomic writes b to path through a temporary file and a rename,
// so a reader never sees half a certificate.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// HTTPSRequest is one line of the TLS request log (Config.HTTPSLog).
type HTTPSRequest = lab.HTTPSRequest

// HTTPSLogName is the https request log's file in the lab's log directory.
const HTTPSLogName = lab.HTTPSLogName

// startHTTPS serves the search handler over TLS on every search address.
func (s *Servers) startHTTPS(ctx context.Context, c Config) error {
	lt, err := newLabTLS(c.Search, c.SearchNames, c.Now())
	if err != nil {
		return fmt.Errorf("lab TLS certificates: %w", err)
	}
	if c.CAFile != "" {
		if err := writeFileAtomic(c.CAFile, lt.caPEM); err != nil {
			return fmt.Errorf("writing the lab CA: %w", err)
		}
	}
	s.caPEM = lt.caPEM
	var logMu sync.Mutex
	var logf *os.File
	if c.HTTPSLog != "" {
		// A lab made by hand (the fake CLI's tests) may have no log
		// directory yet.
		if err := os.MkdirAll(filepath.Dir(c.HTTPSLog), 0o755); err != nil {
			return fmt.Errorf("https request log: %w", err)
		}
		logf, err = os.OpenFile(c.HTTPSLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("https request log: %w", err)
		}
		s.onStop(func() { logMu.Lock(); logf.Close(); logMu.Unlock() })
	}
	h := s.searchHandler()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		if strings.HasPrefix(r.URL.Path, URLTestPath) && s.from503Exit(clientAddr(r)) {
			sw.code = http.StatusServiceUnavailable
			http.Error(w, "503 Service Unavailable", http.StatusServiceUnavailable)
		} else {
			h.ServeHTTP(sw, r)
		}
		if logf != nil {
			b, _ := json.Marshal(HTTPSRequest{At: s.cfg.Now().UTC(), From: clientAddr(r).String(), Path: r.URL.Path, Status: sw.code, Resumed: r.TLS != nil && r.TLS.DidResume})
			logMu.Lock()
			logf.Write(append(b, '\n'))
			logMu.Unlock()
		}
	})
	tc := &tls.Config{Certificates: []tls.Certificate{lt.leaf}, MinVersion: tls.VersionTLS12}
	for _, a := range c.Search {
		if err := s.serveHTTPTLS(ctx, a, c.HTTPSPort, "search-https", handler, tc); err != nil {
			return err
		}
	}
	return nil
}

// from503Exit reports whether a is an exit with the 503 fault. Over plain
// http a 503-ing exit answers the urltest request itself (exit503); over
// TLS it cannot read the request, so it tunnels, and the server plays the
// CDN front that rejects that exit's connectivity checks: the same 503 to
// the same question from the same node.
func (s *Servers) from503Exit(a netip.Addr) bool {
	f := s.cfg.Faults.Current()
	i := slices.IndexFunc(s.cfg.Nodes, func(n lab.Node) bool { return n.Addr == a })
	return i >= 0 && f.Is503(s.cfg.Nodes[i].Name)
}

// CAPEM is the lab CA's certificate (PEM), nil without HTTPSPort.
func (s *Servers) CAPEM() []byte { return s.caPEM }

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// serveHTTPTLS is serveHTTP behind TLS.
func (s *Servers) serveHTTPTLS(ctx context.Context, a netip.Addr, port uint16, what string, h http.Handler, tc *tls.Config) error {
	ln, err := s.listen(ctx, a, port, what)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tc,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.onStop(func() { srv.Close() })
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		srv.ServeTLS(ln, "", "")
	}()
	return nil
}
