package ubus

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArgumentChecksMatchRpcd serves the surflare object's signature twice,
// each behind its own real ubusd: once from our object server, once from
// the real rpcd as a ucode object with the same argument types (rpcd
// enforces those itself). The same `ubus call`s, well and badly typed, must
// give byte-identical transcripts from both, and `ubus -v list surflare`
// must be the same. Only calls without a required argument are left out:
// requiring arguments is our addition (rpcd's ucode objects have no such
// notion and would run the handler).
func TestArgumentChecksMatchRpcd(t *testing.T) {
	ours := needRealUbus(t)
	if ours.root == "" {
		t.Skip("needs the OpenWrt userland's rpcd (../shared/owrt beside the repository)")
	}
	theirs := ours.another()

	obj, err := SurflareObject(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range obj.Methods {
		obj.Methods[i].Handler = func(context.Context, *Request) (Fields, error) { return Fields{{"ok", Bool(true)}}, nil }
	}
	recvOrFail(t, runService(t, &Service{Socket: ours.sock, Objects: []*Object{obj}}), "registration")

	script := filepath.Join(theirs.root, "usr", "share", "rpcd", "ucode", "surflare.uc")
	if err := os.WriteFile(script, []byte(ucodeObject(obj)), 0o644); err != nil {
		t.Fatal(err)
	}
	rpcd := theirs.command(context.Background(), "/sbin/rpcd", "-s", theirs.sockArg)
	rpcd.Stderr = os.Stderr
	if err := rpcd.Start(); err != nil {
		t.Fatalf("starting rpcd: %v", err)
	}
	t.Cleanup(func() { rpcd.Process.Kill(); rpcd.Wait() })
	waitFor(t, "rpcd's surflare object", func() bool {
		out, code := theirs.run("list", ObjectName)
		return code == 0 && out == ObjectName+"\n"
	})

	if a, b := hideIDs(ours.transcript("-v", "list", ObjectName)), hideIDs(theirs.transcript("-v", "list", ObjectName)); a != b {
		t.Errorf("ubus -v list surflare:\nours:\n%s\nrpcd:\n%s", a, b)
	}
	calls := argumentCases(obj)
	for _, c := range calls {
		args := append([]string{"call", ObjectName}, c...)
		if a, b := ours.transcript(args...), theirs.transcript(args...); a != b {
			t.Errorf("ubus %s:\nours:\n%s\nrpcd:\n%s", strings.Join(args, " "), a, b)
		}
	}
	t.Logf("%d calls answered byte for byte as rpcd answers them", len(calls))
}

// another starts a second ubusd in the same OpenWrt root, on its own socket.
func (r *realUbus) another() *realUbus {
	r.t.Helper()
	dir, err := os.MkdirTemp(filepath.Join(r.root, "tmp"), "surfubus")
	if err != nil {
		r.t.Fatal(err)
	}
	o := &realUbus{t: r.t, ubusd: r.ubusd, cli: r.cli, root: r.root,
		sock: filepath.Join(dir, "ubus.sock"), aclDir: filepath.Join(dir, "acl.d")}
	if err := os.Mkdir(o.aclDir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	o.sockArg, o.aclArg = o.inside(o.sock), o.inside(o.aclDir)
	r.t.Cleanup(o.stop)
	o.start()
	return o
}

// ucodeTypeHint is the value rpcd's ucode plugin reads a blobmsg type from
// (rpc_ucode_method_register).
var ucodeTypeHint = map[BlobmsgType]string{
	TypeString: `""`, TypeBool: "true", TypeInt16: "16", TypeInt32: "32", TypeInt64: "64",
	TypeDouble: "1.5", TypeArray: "[]", TypeTable: "{}",
}

// ucodeObject is an rpcd ucode script serving obj's signature, arguments
// in our signature's order, every method answering {"ok": true}.
func ucodeObject(obj *Object) string {
	var sb strings.Builder
	sb.WriteString("'use strict';\nreturn {\n\t'" + obj.Name + "': {\n")
	for _, m := range obj.signature() {
		sb.WriteString("\t\t'" + m.Name + "': { args: {")
		for i, a := range m.Value.Items {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, " '%s': %s", a.Name, ucodeTypeHint[BlobmsgType(a.Value.Int)])
		}
		sb.WriteString(" }, call: function(req) { return { ok: true }; } },\n")
	}
	sb.WriteString("\t}\n};\n")
	return sb.String()
}

// argumentCases are calls of every method: all arguments well typed, then
// each argument given as every other JSON kind the CLI can send (string,
// INT32, INT64, double, boolean, table, array, null), an undeclared
// argument, LuCI's session id, and a non-object message. Required
// arguments are always given, well typed, unless they are the one mistyped.
func argumentCases(obj *Object) [][]string {
	good := map[BlobmsgType]string{TypeString: `"Chicago"`, TypeBool: "true", TypeInt32: "5", TypeInt64: "5000000000",
		TypeInt16: "5", TypeDouble: "2.5", TypeArray: "[1]", TypeTable: `{"a":1}`}
	kinds := []string{`"5"`, "5", "5000000000", "2.5", "true", "false", "1", `{"a":1}`, "[1,2]", "null"}
	var out [][]string
	for _, m := range obj.Methods {
		names := make([]string, 0, len(m.Policy))
		for _, f := range obj.signatureOf(m) {
			names = append(names, f.Name)
		}
		body := func(over string, val string) string {
			var parts []string
			for _, n := range names {
				v := good[m.Policy[n]]
				if n == over {
					v = val
				} else if !contains(m.Required, n) {
					continue
				}
				parts = append(parts, fmt.Sprintf("%q:%s", n, v))
			}
			if over != "" && !contains(names, over) {
				parts = append(parts, fmt.Sprintf("%q:%s", over, val))
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
		out = append(out, []string{m.Name, body("", "")})
		for _, n := range names {
			for _, k := range kinds {
				out = append(out, []string{m.Name, body(n, k)})
			}
		}
		out = append(out, []string{m.Name, body("nosuch", "1")}, []string{m.Name, body(SessionArg, `"0123abcd"`)},
			[]string{m.Name, body(SessionArg, "5")}, []string{m.Name, "[1]"})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// signatureOf is one method's arguments in signature order.
func (o *Object) signatureOf(m Method) Fields {
	for _, f := range o.signature() {
		if f.Name == m.Name {
			return f.Value.Items
		}
	}
	return nil
}
