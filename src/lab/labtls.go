package lab

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// The lab's TLS: the internet (lab/internet, tls.go) serves the search
// host's generate_204 over https as well, with a certificate from a CA it
// makes at start and writes to <labdir>/CAFileName. The daemon the lab
// starts trusts that CA (SSL_CERT_FILE, daemonCommand and the chaos
// supervisor), so it can run with
// an https:// 503 probe URL as shipped (HTTPSProbeSets). The OpenWrt-box
// mode (procd starts the daemon) does not pass the variable: it stays on
// the http URL.

// CAFileName is the lab CA's certificate (PEM) in the lab directory.
const CAFileName = "lab-ca.pem"

// HTTPSLogName is the file in the lab's log directory where the internet's
// https server records every request it answers (HTTPSRequest).
const HTTPSLogName = "https-requests.jsonl"

// SearchHTTPSURL is the search host's generate_204 over TLS: the lab's
// stand-in for the shipped storm503.probe_url (an https:// URL on the
// Internet; config.Defaults has it, the lab never dials it).
var SearchHTTPSURL = "https://" + Search.String() + "/generate_204"

// HTTPSProbeSets point the daemon's 503 probe at SearchHTTPSURL (a TLS
// handshake through the tunnel each round, as with the shipped default)
// instead of the lab's plain-http URL.
func HTTPSProbeSets() []string {
	return []string{"surflare.storm503=storm503", "surflare.storm503.probe_url=" + SearchHTTPSURL}
}

// HTTPSRequest is one request the internet's https server answered.
type HTTPSRequest struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"` // the source address the server saw
	Path   string    `json:"path"`
	Status int       `json:"status"`
	// Resumed: the client resumed a TLS session (no certificate sent).
	Resumed bool `json:"resumed"`
}

// CAPath is the lab CA's certificate file (written when the internet starts).
func (l *Lab) CAPath() string { return l.Path(CAFileName) }

// HTTPSRequests reads the https request log (none yet: nil, nil).
func (l *Lab) HTTPSRequests() ([]HTTPSRequest, error) {
	f, err := os.Open(l.Path(dirLog, HTTPSLogName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the https request log: %w", err)
	}
	defer f.Close()
	var out []HTTPSRequest
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r HTTPSRequest
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}
