package ubus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Golden trace replay. A fake ubusd plays a trace's S>C messages to our
// code and checks that every C>S message our code sends is byte-for-byte
// the one the real libubus/CLI sent.
//
// Id substitution: ubusd picks client, object and type ids at random, so a
// replay must prove that our code echoes the ids it is given rather than
// happening to send the trace's numbers. Before a replay every id in the
// trace (header peers >= 1024 and OBJID/OBJTYPE/TARGET values >= 1024) is
// mapped to a fresh random value, consistently across the whole trace, and
// every aligned 32-bit word equal to an old id is rewritten — in the S>C
// messages we play and in the C>S messages we expect. Likewise the seq of an
// INVOKE that ubusd delivers (the caller's or ubusd's own counter) is
// remapped, together with the DATA/STATUS that answer it. Our own request
// seqs are not remapped: they must count 1, 2, 3… like libubus.

// replayEnv is a trace prepared for one replay.
type replayEnv struct {
	script []traceLine
	ids    map[uint32]uint32
	done   chan struct{} // closed when the fake ubusd has played the whole script
}

// id returns the replacement of an id as it appears in the fixture file.
func (e *replayEnv) id(orig uint32) uint32 {
	n, ok := e.ids[orig]
	if !ok {
		panic(fmt.Sprintf("id %08x is not in the trace", orig))
	}
	return n
}

// topLevelU32s walks a message's top-level attributes without the package's
// decoder (so the substitution does not trust the code under test) and
// returns the u32 payloads of the id-carrying attributes.
func topLevelU32s(msg []byte) []uint32 {
	var out []uint32
	for off := headerLen + attrHeaderLen; off+4 <= len(msg); {
		w := binary.BigEndian.Uint32(msg[off:])
		id, raw := (w>>24)&0x7f, int(w&0xffffff)
		if raw < 4 {
			break
		}
		if (id == 3 || id == 5 || id == 8) && raw == 8 && off+8 <= len(msg) {
			out = append(out, binary.BigEndian.Uint32(msg[off+4:]))
		}
		off += (raw + 3) &^ 3
	}
	return out
}

func prepareReplay(t *testing.T, name string) *replayEnv {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("%s: id substitution seed %d", name, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	lines := loadTrace(t, name)
	env := &replayEnv{ids: map[uint32]uint32{}, done: make(chan struct{})}
	for _, l := range lines {
		cands := topLevelU32s(l.msg)
		cands = append(cands, binary.BigEndian.Uint32(l.msg[4:]))
		for _, v := range cands {
			if v >= systemObjectMax {
				env.ids[v] = 0
			}
		}
	}
	used := map[uint32]bool{}
	for old := range env.ids {
		used[old] = true
	}
	for old := range env.ids {
		n := rng.Uint32()
		for n < systemObjectMax || used[n] {
			n = rng.Uint32()
		}
		used[n] = true
		env.ids[old] = n
	}
	seqs := map[uint16]uint16{}
	for _, l := range lines {
		if l.toClient && MsgType(l.msg[1]) == MsgInvoke {
			seqs[binary.BigEndian.Uint16(l.msg[2:])] = uint16(rng.IntN(60000) + 1000)
		}
	}
	for _, l := range lines {
		b := bytes.Clone(l.msg)
		for off := 4; off+4 <= len(b); off += 4 {
			if n, ok := env.ids[binary.BigEndian.Uint32(b[off:])]; ok {
				binary.BigEndian.PutUint32(b[off:], n)
			}
		}
		typ := MsgType(b[1])
		if (l.toClient && typ == MsgInvoke) || (!l.toClient && (typ == MsgData || typ == MsgStatus)) {
			if n, ok := seqs[binary.BigEndian.Uint16(b[2:])]; ok {
				binary.BigEndian.PutUint16(b[2:], n)
			}
		}
		env.script = append(env.script, traceLine{toClient: l.toClient, msg: b})
	}
	return env
}

// readRawFrame frames one message without the package's reader.
func readRawFrame(r io.Reader) ([]byte, error) {
	head := make([]byte, 12)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(head[8:]) & 0xffffff)
	if n < 4 || n > MaxMessageLen {
		return nil, fmt.Errorf("bad length %d", n)
	}
	b := make([]byte, 8+n)
	copy(b, head)
	_, err := io.ReadFull(r, b[12:])
	return b, err
}

func describe(b []byte) string {
	m, err := Decode(b)
	if err != nil {
		return fmt.Sprintf("undecodable (%v)", err)
	}
	j, _ := json.Marshal(m.Attrs)
	return fmt.Sprintf("%s seq=%d peer=%08x %s", m.Type, m.Seq, m.Peer, j)
}

// play runs the script on one accepted connection.
func (e *replayEnv) play(nc net.Conn) error {
	r := bufio.NewReader(nc)
	for i, l := range e.script {
		if l.toClient {
			if _, err := nc.Write(l.msg); err != nil {
				return fmt.Errorf("step %d: writing to client: %w", i, err)
			}
			continue
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := readRawFrame(r)
		if err != nil {
			return fmt.Errorf("step %d: want %s from the client, got %w", i, describe(l.msg), err)
		}
		if !bytes.Equal(got, l.msg) {
			return fmt.Errorf("step %d: client sent\n  %x\n  %s\nwant\n  %x\n  %s", i, got, describe(got), l.msg, describe(l.msg))
		}
	}
	close(e.done)
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if extra, err := readRawFrame(r); err == nil {
		return fmt.Errorf("after the script the client sent %s", describe(extra))
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		// (a reset is a close with our last S>C message still unread)
		return fmt.Errorf("after the script: %w (client did not close)", err)
	}
	return nil
}

// replay runs scenario against a fake ubusd playing the trace, then closes
// the client and checks the fake saw exactly the expected messages.
func replay(t *testing.T, name string, scenario func(ctx context.Context, env *replayEnv, c *Conn) error) {
	t.Helper()
	env := prepareReplay(t, name)
	sock := filepath.Join(t.TempDir(), "ubus.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	played := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			played <- err
			return
		}
		defer nc.Close()
		played <- env.play(nc)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, sock)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if want := binary.BigEndian.Uint32(env.script[0].msg[4:]); c.ClientID() != want {
		t.Errorf("client id %08x, want %08x from HELLO", c.ClientID(), want)
	}
	scErr := scenario(ctx, env, c)
	c.Close()
	if err := <-played; err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if scErr != nil {
		t.Errorf("%s: scenario: %v", name, scErr)
	}
}

// waitScript waits until the fake ubusd has played everything.
func waitScript(ctx context.Context, env *replayEnv) error {
	select {
	case <-env.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("script not finished: %w", ctx.Err())
	}
}

// wantJSON compares members with the JSON the ubus CLI printed.
func wantJSON(what string, got Fields, want string) error {
	b, err := json.Marshal(got)
	if err != nil {
		return err
	}
	if string(b) != want {
		return fmt.Errorf("%s: got %s, want %s", what, b, want)
	}
	return nil
}

func wantStatus(err error, want Status) error {
	if !errors.Is(err, want) {
		return fmt.Errorf("got error %v, want status %d (%v)", err, want, want)
	}
	return nil
}
