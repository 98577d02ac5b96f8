package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// The CLI shows a daemon's answer (a Response's Data) to people as
// indented key: value lines, whatever the command; --json prints it as it
// came.

// Write prints the answer to stdout as the CLI shows it: with asJSON the
// data as it came (a failed action's outcome too); otherwise an action's
// one-line outcome, the data as text, or "ok" for an answer without data.
// A failure's error is the caller's to print (to stderr), so text mode
// prints nothing for it.
func (r *Response) Write(stdout io.Writer, asJSON bool) {
	switch {
	case asJSON && (r.OK || len(r.Data) > 0):
		WriteJSON(stdout, r.Data)
	case asJSON, !r.OK:
	case r.Message != "":
		fmt.Fprintln(stdout, r.Message)
	case len(r.Data) == 0:
		fmt.Fprintln(stdout, "ok")
	default:
		WriteText(stdout, r.Data)
	}
}

// WriteJSON prints data indented ("null" when empty or not JSON).
func WriteJSON(w io.Writer, data json.RawMessage) {
	var out bytes.Buffer
	if len(data) == 0 || json.Indent(&out, data, "", "  ") != nil {
		out.Reset()
		out.WriteString("null")
	}
	fmt.Fprintf(w, "%s\n", out.Bytes())
}

// summaryFirst are the keys a person looks for first in a status answer;
// everything else follows alphabetically. Unknown keys are shown as they
// come, so the daemon can grow its status without breaking this.
var summaryFirst = []string{"why", "state", "node", "transit", "mode", "role", "exit", "exit_ip", "exit_country", "uptime_s", "uptime", "started_at", "since", "message"}

// WriteText renders the daemon's JSON answer for people: one "key: value"
// a line, nested objects indented, lists of scalars joined.
func WriteText(w io.Writer, data json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		fmt.Fprintf(w, "%s\n", data)
		return
	}
	if obj, ok := v.(map[string]any); ok {
		printObject(w, obj, 0)
		return
	}
	printValue(w, "", v, 0)
}

func printObject(w io.Writer, obj map[string]any, depth int) {
	for _, k := range orderedKeys(obj) {
		// The status's why line is one line for people; its codes are in
		// --json.
		if why, ok := obj[k].(map[string]any); ok && k == "why" && depth == 0 {
			if line, ok := why["line"].(string); ok {
				fmt.Fprintf(w, "why: %s\n", line)
				continue
			}
		}
		printValue(w, k, obj[k], depth)
	}
}

func orderedKeys(obj map[string]any) []string {
	var keys []string
	first := map[string]bool{}
	for _, k := range summaryFirst {
		if _, ok := obj[k]; ok {
			keys = append(keys, k)
			first[k] = true
		}
	}
	var rest []string
	for k := range obj {
		if !first[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(keys, rest...)
}

func printValue(w io.Writer, key string, v any, depth int) {
	indent := strings.Repeat("  ", depth)
	label := indent
	if key != "" {
		label += strings.ReplaceAll(key, "_", " ") + ": "
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			fmt.Fprintf(w, "%s-\n", label)
			return
		}
		fmt.Fprintf(w, "%s\n", strings.TrimSuffix(label, " "))
		printObject(w, x, depth+1)
	case []any:
		if scalars(x) {
			parts := make([]string, len(x))
			for i, e := range x {
				parts[i] = scalar(e)
			}
			if len(parts) == 0 {
				parts = []string{"-"}
			}
			fmt.Fprintf(w, "%s%s\n", label, strings.Join(parts, ", "))
			return
		}
		fmt.Fprintf(w, "%s\n", strings.TrimSuffix(label, " "))
		for _, e := range x {
			if obj, ok := e.(map[string]any); ok && scalarObject(obj) {
				fmt.Fprintf(w, "%s  - %s\n", indent, inline(obj))
				continue
			}
			fmt.Fprintf(w, "%s  -\n", indent)
			printValue(w, "", e, depth+2)
		}
	default:
		fmt.Fprintf(w, "%s%s\n", label, scalar(x))
	}
}

func scalars(list []any) bool {
	for _, e := range list {
		switch e.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

func scalarObject(obj map[string]any) bool {
	for _, v := range obj {
		switch v.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

// inline writes a flat object on one line: "kind=search ok=true rtt_ms=12".
func inline(obj map[string]any) string {
	var parts []string
	for _, k := range orderedKeys(obj) {
		parts = append(parts, k+"="+scalar(obj[k]))
	}
	return strings.Join(parts, " ")
}

// neverHappened reports a time that never happened: the daemon's JSON
// keeps Go's zero time for it ("0001-01-01T00:00:00Z"; the API and LuCI
// read that form, so it stays there), and a person reads "never" instead.
func neverHappened(s string) bool {
	if !strings.HasPrefix(s, "0001-01-01") {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && t.IsZero()
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return `""`
		}
		if neverHappened(x) {
			return "never"
		}
		return x
	case bool:
		if x {
			return "yes"
		}
		return "no"
	default:
		return fmt.Sprint(x)
	}
}
