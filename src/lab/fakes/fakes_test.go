package fakes

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFaultsRoundTripAndUpdateStampsInjected(t *testing.T) {
	dir := t.TempDir()
	f, err := LoadFaults(dir)
	if err != nil || f.Auth != "" || len(f.NodeDown) != 0 {
		t.Fatalf("missing faults.json should mean no faults, got %+v, %v", f, err)
	}
	t0 := time.Date(2026, 11, 29, 14, 3, 11, 0, time.UTC)
	if _, err := Update(dir, t0, func(f *Faults) {
		f.NodeDown = []string{"Los Angeles"}
		f.LatencyMS = map[string]int{"Chicago": 80}
	}); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Minute)
	got, err := Update(dir, t1, func(f *Faults) { f.Auth = AuthExpired })
	if err != nil {
		t.Fatal(err)
	}
	if !got.IsNodeDown("Los Angeles") || got.IsNodeDown("Dallas") || got.Latency("Chicago") != 80*time.Millisecond {
		t.Fatalf("update lost earlier faults: %+v", got)
	}
	if !got.Injected["node_down"].Equal(t0) || !got.Injected["auth"].Equal(t1) {
		t.Fatalf("injected stamps wrong: %v", got.Injected)
	}
	if _, ok := got.Injected["api_down"]; ok {
		t.Fatalf("unchanged fault was stamped: %v", got.Injected)
	}
	again, err := LoadFaults(dir)
	if err != nil || again.Auth != AuthExpired || !again.Injected["auth"].Equal(t1) {
		t.Fatalf("reload: %+v %v", again, err)
	}
}

func TestFaultsRejectsUnknownAuth(t *testing.T) {
	dir := t.TempDir()
	if err := (Faults{Auth: "banana"}).Save(dir); err == nil {
		t.Fatal("saving an unknown auth fault should fail")
	}
	os.WriteFile(filepath.Join(dir, FaultsFile), []byte(`{"auth":"banana"}`), 0o644)
	if _, err := LoadFaults(dir); err == nil || !strings.Contains(err.Error(), "banana") {
		t.Fatalf("want an error naming the bad value, got %v", err)
	}
}

func TestWatcherRereadsOnlyOnChangeAndKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1000, 0)
	w := NewWatcher(dir, func() time.Time { return now })
	if w.Current().ProxyLoop {
		t.Fatal("no file: no faults")
	}
	if err := (Faults{ProxyLoop: true}).Save(dir); err != nil {
		t.Fatal(err)
	}
	if w.Current().ProxyLoop {
		t.Fatal("re-read before WatchInterval passed")
	}
	now = now.Add(WatchInterval)
	if !w.Current().ProxyLoop {
		t.Fatal("change not seen after WatchInterval")
	}
	// A broken file keeps the last good faults.
	os.WriteFile(filepath.Join(dir, FaultsFile), []byte(`{"proxy_loop": tr`), 0o644)
	now = now.Add(WatchInterval)
	if !w.Current().ProxyLoop {
		t.Fatal("broken file dropped the last good faults")
	}
	os.Remove(filepath.Join(dir, FaultsFile))
	now = now.Add(WatchInterval)
	if w.Current().ProxyLoop {
		t.Fatal("removed file should mean no faults")
	}
}

func TestLabInfoDefaultsAndSave(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, LabInfoFile), []byte(`{"prefix":"swx"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	li, err := LoadLabInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if li.Prefix != "swx" || li.URLTestIntervalS != DefaultURLTestIntervalS || li.ProxyLog != filepath.Join(dir, "log", "surflare-proxy.log") {
		t.Fatalf("defaults not applied: %+v", li)
	}
	li.URLTestIntervalS = 2
	if err := li.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := LoadLabInfo(dir)
	if err != nil || !reflect.DeepEqual(back, li) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}

func TestParseConnect(t *testing.T) {
	for _, tc := range []struct{ line, exit, dst string }{
		{"CONNECT Dallas 198.18.30.1:80", "Dallas", "198.18.30.1:80"},
		{"CONNECT Los Angeles 198.18.30.21:80", "Los Angeles", "198.18.30.21:80"},
		{"CONNECT 198.18.20.2:8444 [fd00:30::1]:80", "198.18.20.2:8444", "[fd00:30::1]:80"},
	} {
		exit, dst, err := ParseConnect(tc.line)
		if err != nil || exit != tc.exit || dst != tc.dst {
			t.Errorf("ParseConnect(%q) = %q %q %v", tc.line, exit, dst, err)
		}
	}
	for _, bad := range []string{"", "GET / HTTP/1.1", "CONNECT Dallas", "CONNECT  1.2.3.4:80", "CONNECT Dallas nohostport"} {
		if _, _, err := ParseConnect(bad); err == nil {
			t.Errorf("ParseConnect(%q) accepted", bad)
		}
	}
}

func TestDialTunnelHandshakeKeepsPayload(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := ReadLine(c)
			if exit, _, _ := ParseConnect(line); exit == "Dead" {
				io.WriteString(c, "ERR node down\n")
			} else {
				// Reply and payload in one write: the client must not lose the payload.
				io.WriteString(c, "OK\nhello")
			}
			c.Close()
		}
	}()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := DialTunnel(ctx, d.DialContext, ln.Addr().String(), "Los Angeles", "198.18.30.1:80")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	if string(b) != "hello" {
		t.Fatalf("payload after OK = %q", b)
	}
	_, err = DialTunnel(ctx, d.DialContext, ln.Addr().String(), "Dead", "198.18.30.1:80")
	var te *TunnelError
	if !errors.As(err, &te) || te.Reason != "node down" {
		t.Fatalf("want TunnelError node down, got %v", err)
	}
}
