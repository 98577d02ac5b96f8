package progress

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// Off a terminal every step and result is a plain line; in-place updates
// (byte counts) are left out.
func TestPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, false)
	fmt.Fprint(p, "[1/2] Dallas: connecting…\n[1/2] Dallas: ok 80 ms\n[2/2] Mia")
	fmt.Fprint(p, "mi: connecting…\n")
	p.Update("[2/2] Miami: 3 kB")
	fmt.Fprint(p, "[2/2] Miami: ok\n")
	p.Done()
	want := "[1/2] Dallas: connecting…\n[1/2] Dallas: ok 80 ms\n[2/2] Miami: connecting…\n[2/2] Miami: ok\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}

// On a terminal a step is shown in place: each step and update replaces
// it, a result line erases it, Done ends it with a newline.
func TestTerminalRewritesTheStepLine(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, true)
	fmt.Fprint(p, "[1/2] Dallas: connecting…\n")
	p.Update("[1/2] Dallas: measuring")
	fmt.Fprint(p, "[1/2] Dallas: ok\n")
	p.Step("downloading x…")
	p.Done()
	p.Done() // nothing open: no second newline
	want := clearLine + "[1/2] Dallas: connecting…" + clearLine + "[1/2] Dallas: measuring" + clearLine + "[1/2] Dallas: ok\n" + clearLine + "downloading x…\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}

// The transport shows the bytes read so far, and the total when known.
func TestTransportCountsTheDownload(t *testing.T) {
	body := strings.Repeat("x", 3<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		io.WriteString(w, body)
	}))
	defer srv.Close()
	var b bytes.Buffer
	p := New(&b, true)
	resp, err := (&http.Client{Transport: Transport(p, http.DefaultTransport)}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != body {
		t.Fatalf("body changed: %d bytes", len(got))
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if want := clearLine + "downloading " + host + "… 3 kB of 3 kB"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("last update %q, want it to end with %q", b.String(), want)
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) || IsTerminal(&bytes.Buffer{}) {
		t.Error("a file or a buffer is not a terminal")
	}
	if devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		defer devnull.Close()
		if IsTerminal(devnull) {
			t.Error("/dev/null is a character device, not a terminal")
		}
	}
}
