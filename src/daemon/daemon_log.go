package daemon

import (
	"io"
	"log/slog"
)

// SetupLogging installs the daemon's handler as the default logger. Every
// package looks its subsystem logger up at each use
// (slog.Default().With("subsystem", …)), so their lines reach this handler
// with their own level and attributes; what third-party code writes through
// package log arrives as INFO (slog.SetDefault routes it here).
func SetupLogging(w io.Writer, level slog.Level) {
	slog.SetDefault(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})))
}
