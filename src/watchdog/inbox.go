package watchdog

// Inbox carries the detectors' requests for a health check to the engine.
// It is made before either: the detectors are built with it, the engine
// reads it (Deps.Inbox), so neither needs the other to exist first. A
// detector only asks; the engine alone decides whether to act
// (onCheckRequestLocked).
type Inbox struct {
	ch chan CheckRequest
}

// CheckRequest is one detector's request.
type CheckRequest struct {
	// Reason says which detector asked and what it saw; it is logged.
	Reason string
}

// inboxSize: one waiting request stands for any that follow until the
// engine takes it (they all ask for the same check).
const inboxSize = 1

// NewInbox returns an empty inbox.
func NewInbox() *Inbox { return &Inbox{ch: make(chan CheckRequest, inboxSize)} }

// RequestCheck asks the engine for a check now. It never blocks, and
// reports false when a request is already waiting (this one is covered by
// it) or the inbox is nil.
func (i *Inbox) RequestCheck(reason string) bool {
	if i == nil {
		return false
	}
	select {
	case i.ch <- CheckRequest{Reason: reason}:
		return true
	default:
		return false
	}
}

// requests is the engine's end; nil (never ready) for a nil inbox.
func (i *Inbox) requests() <-chan CheckRequest {
	if i == nil {
		return nil
	}
	return i.ch
}
