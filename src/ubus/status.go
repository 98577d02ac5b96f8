package ubus

import (
	"errors"
	"fmt"
)

// Status is a UBUS_STATUS_* code. It is an error, so a handler can return
// one to pick the code the caller sees, and a call that ends with a non-zero
// status returns it (test with errors.Is or errors.As).
type Status uint32

// Status codes, numbered as in libubus.h.
const (
	StatusOK               Status = 0
	StatusInvalidCommand   Status = 1
	StatusInvalidArgument  Status = 2
	StatusMethodNotFound   Status = 3
	StatusNotFound         Status = 4
	StatusNoData           Status = 5
	StatusPermissionDenied Status = 6
	StatusTimeout          Status = 7
	StatusNotSupported     Status = 8
	StatusUnknownError     Status = 9
	StatusConnectionFailed Status = 10
	StatusNoMemory         Status = 11
	StatusParseError       Status = 12
	StatusSystemError      Status = 13
)

// statusText is libubus's ubus_strerror wording, which users see from the CLI.
var statusText = [...]string{
	"Success", "Invalid command", "Invalid argument", "Method not found",
	"Not found", "No response", "Permission denied", "Request timed out",
	"Operation not supported", "Unknown error", "Connection failed",
	"Out of memory", "Parsing message data failed", "System error",
}

func (s Status) Error() string {
	if int(s) < len(statusText) {
		return statusText[s]
	}
	return fmt.Sprintf("Unknown error: %d", uint32(s))
}

// statusOf picks the status to answer a handler's error with: a Status
// anywhere in the chain wins, anything else is UNKNOWN_ERROR.
func statusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var s Status
	if errors.As(err, &s) {
		return s
	}
	return StatusUnknownError
}
