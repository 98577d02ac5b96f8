package main

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strconv"
	"strings"
)

// Several packages take their logger at init, `slog.Default().With(…)`,
// before `run` has installed its handler; their lines then reach the
// handler through package log as INFO with the level and attributes inside
// the message ("INFO WARN loopguard: …"). setupLogging installs the handler
// and routes package log through relevel, which restores each line's level,
// message and attributes, so every subsystem logs alike.
func setupLogging(w io.Writer, level slog.Level) {
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})
	slog.SetDefault(slog.New(h))
	log.SetFlags(0)
	log.SetOutput(relevel{slog.New(h)})
}

// relevel re-parses the default handler's "LEVEL msg k=v …" lines.
type relevel struct{ l *slog.Logger }

func (r relevel) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	level, rest := slog.LevelInfo, line
	if word, after, ok := strings.Cut(line, " "); ok {
		var lv slog.Level
		if lv.UnmarshalText([]byte(word)) == nil {
			level, rest = lv, after
		}
	}
	msg, attrs := splitAttrs(rest)
	r.l.Log(context.Background(), level, msg, attrs...)
	return len(p), nil
}

// splitAttrs takes trailing k=v pairs (values possibly quoted) off a line.
// The message is everything before the first " key=" that starts a run of
// well-formed pairs up to the end.
func splitAttrs(s string) (string, []any) {
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' {
			continue
		}
		if attrs, ok := parsePairs(s[i+1:]); ok {
			return s[:i], attrs
		}
	}
	return s, nil
}

func parsePairs(s string) ([]any, bool) {
	var out []any
	for s != "" {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			return nil, false
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, false
			}
			v, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			v, rest, _ = strings.Cut(rest, " ")
			rest = " " + rest
			if rest == " " {
				rest = ""
			}
		}
		out = append(out, k, v)
		if rest == "" {
			return out, true
		}
		if rest[0] != ' ' {
			return nil, false
		}
		s = rest[1:]
	}
	return out, true
}
