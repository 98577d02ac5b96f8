package uci

// Errno is one of libuci's error classes. The uci CLI prints its text and,
// for some commands, uses its number as the exit status, so both matter.
type Errno int

// libuci's error numbers (enum in uci.h).
const (
	ErrMem       Errno = 1
	ErrInval     Errno = 2
	ErrNotFound  Errno = 3
	ErrIO        Errno = 4
	ErrParse     Errno = 5
	ErrDuplicate Errno = 6
	ErrUnknown   Errno = 7
)

var errnoText = map[Errno]string{
	ErrMem:       "Out of memory",
	ErrInval:     "Invalid argument",
	ErrNotFound:  "Entry not found",
	ErrIO:        "I/O error",
	ErrParse:     "Parse error",
	ErrDuplicate: "Duplicate entry",
	ErrUnknown:   "Unknown error",
}

// Error returns uci's text for the error class.
func (e Errno) Error() string {
	if s, ok := errnoText[e]; ok {
		return s
	}
	return errnoText[ErrUnknown]
}
