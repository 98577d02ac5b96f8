package watchdog

import (
	"context"
	"fmt"
	"os"
	"syscall"
)

// Signal maps a Unix signal to its command: SIGUSR1 checks now, SIGUSR2
// toggles diag mode, SIGHUP reloads the config, SIGTERM and SIGINT stop
// with the kill switch left armed. cmd forwards signal.Notify here.
func (w *Watchdog) Signal(ctx context.Context, sig os.Signal) error {
	switch sig {
	case syscall.SIGUSR1:
		return w.Check(ctx)
	case syscall.SIGUSR2:
		return w.ToggleDiag(ctx)
	case syscall.SIGHUP:
		return w.ReloadFromSource(ctx)
	case syscall.SIGTERM, syscall.SIGINT:
		return w.Shutdown(ctx, false)
	}
	return fmt.Errorf("signal %v: not handled", sig)
}
