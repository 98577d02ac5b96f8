// Package progress shows the steps of a long operation (routes update,
// probe) to the person waiting for it. On a terminal a step in progress is
// one line rewritten in place ("downloading … 1.2 MB"), replaced by the
// next line; anywhere else (a pipe, a file, procd's log) each step is a
// plain line of its own and in-place updates are left out, so a log holds
// what happened and no carriage returns.
package progress

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// StepSuffix ends a line that is a step in progress rather than a result:
// "[2/6] Dallas: connecting…". Lines written through Writer with it are
// steps; the others are results.
const StepSuffix = "…"

// clearLine returns to the start of the line and erases it (ANSI EL).
const clearLine = "\r\x1b[K"

// Writer is an io.Writer for progress and result lines.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	tty  bool
	open bool   // a step line is on screen without its newline
	buf  []byte // the start of a line not yet ended
}

// New writes to w; steps are rewritten in place when tty is true.
func New(w io.Writer, tty bool) *Writer { return &Writer{w: w, tty: tty} }

// Auto is New with tty true when w is a terminal.
func Auto(w io.Writer) *Writer { return New(w, IsTerminal(w)) }

// IsTerminal reports whether w is a terminal (not /dev/null, a pipe or a
// file: those are character devices or not, but have no termios).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Write takes whole lines; one ending in StepSuffix is a step.
func (p *Writer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(p.buf[:i])
		p.buf = p.buf[i+1:]
		if strings.HasSuffix(line, StepSuffix) {
			p.stepLocked(line)
		} else {
			p.lineLocked(line)
		}
	}
}

// Step shows a step that has started.
func (p *Writer) Step(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stepLocked(msg)
}

// Update replaces the step line on a terminal (a byte count, a phase);
// elsewhere it writes nothing: the step's own line says enough.
func (p *Writer) Update(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.stepLocked(msg)
	}
}

// Done ends the step line on a terminal, so what follows starts on a line
// of its own.
func (p *Writer) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		fmt.Fprint(p.w, "\n")
		p.open = false
	}
}

func (p *Writer) stepLocked(msg string) {
	if !p.tty {
		fmt.Fprintln(p.w, msg)
		return
	}
	fmt.Fprint(p.w, clearLine+msg)
	p.open = true
}

func (p *Writer) lineLocked(msg string) {
	if p.open {
		fmt.Fprint(p.w, clearLine)
		p.open = false
	}
	fmt.Fprintln(p.w, msg)
}

// Transport counts the bytes of each response body read through base and
// shows them as the step "downloading HOST… N MB" on a terminal.
func Transport(p *Writer, base http.RoundTripper) http.RoundTripper {
	return transport{p, base}
}

type transport struct {
	p    *Writer
	base http.RoundTripper
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		resp.Body = &counter{ReadCloser: resp.Body, p: t.p, label: "downloading " + req.URL.Host + StepSuffix, total: resp.ContentLength}
	}
	return resp, err
}

type counter struct {
	io.ReadCloser
	p     *Writer
	label string
	n     int64
	total int64 // -1 when unknown
}

func (c *counter) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	if n == 0 {
		return n, err
	}
	c.n += int64(n)
	msg := fmt.Sprintf("%s %s", c.label, size(c.n))
	if c.total > 0 {
		msg += fmt.Sprintf(" of %s", size(c.total))
	}
	c.p.Update(msg)
	return n, err
}

// size is n bytes for people: "812 kB", "3.4 MB".
func size(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d kB", n>>10)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}
