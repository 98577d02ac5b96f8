package uci

// lexer reproduces libuci's line-buffer tokenizer. uci reports error
// positions as offsets into this buffer, and its quirks (a '#' inside a word
// starts a comment, a ';' ends a statement, quoted strings continue over
// lines, backslash-newline joins lines) all follow from how it reads and
// rewrites the buffer in place, so the buffer is modelled as it is.
type lexer struct {
	data []byte // the whole input
	rd   int    // read offset into data
	eof  bool   // a read hit the end of data (C feof)

	buf    []byte // the logical line; reading past len(buf) yields 0 (NUL)
	bufsz  int    // libuci's allocation size; decides how much fgets reads
	filled int    // libuci's buf_filled
	pos    int    // parse position in buf
	line   int    // newline-terminated lines read so far

	reason string // set before a parse failure is raised
}

// parseFailure is raised (panicked) inside the lexer and parser to unwind
// to the statement loop, the way libuci longjmps; it never escapes the
// package.
type parseFailure struct {
	msg  string
	line int
	byte int
}

const initialBufSize = 32 // libuci's LINEBUF

func newLexer(data []byte) *lexer {
	return &lexer{data: data}
}

func (l *lexer) at(i int) byte {
	if i >= 0 && i < len(l.buf) {
		return l.buf[i]
	}
	return 0
}

func (l *lexer) set(i int, c byte) {
	if i >= 0 && i < len(l.buf) {
		l.buf[i] = c
	}
}

func (l *lexer) cur() byte { return l.at(l.pos) }

// fail aborts the current statement with a parse error at the current
// position.
func (l *lexer) fail(msg string) {
	panic(&parseFailure{msg: msg, line: l.line, byte: l.pos})
}

// fgets reads like C fgets into a buffer of n bytes: at most n-1 bytes,
// stopping after a newline.
func (l *lexer) fgets(n int) ([]byte, bool) {
	if n <= 1 {
		return nil, false
	}
	if l.rd >= len(l.data) {
		l.eof = true
		return nil, false
	}
	start := l.rd
	for l.rd-start < n-1 {
		if l.rd >= len(l.data) {
			l.eof = true
			break
		}
		c := l.data[l.rd]
		l.rd++
		if c == '\n' {
			break
		}
	}
	return l.data[start:l.rd], true
}

// maxBufSize is where the line buffer stops growing: far beyond any config,
// where libuci's realloc would have failed already.
const maxBufSize = 1 << 30

// getln reads the next physical line into the buffer at offset, growing
// the buffer and continuing while the line has no newline yet.
func (l *lexer) getln(offset int) {
	if l.bufsz == 0 {
		l.bufsz = initialBufSize
	}
	if offset >= l.bufsz-1 {
		l.bufsz *= 2
	}
	ofs := offset
	for {
		if ofs <= len(l.buf) {
			l.buf = l.buf[:ofs]
		} else {
			l.buf = append(l.buf, make([]byte, ofs-len(l.buf))...)
		}
		chunk, ok := l.fgets(l.bufsz - ofs)
		if !ok {
			return
		}
		// A NUL byte ends the C string: the rest of this read is lost.
		for i, c := range chunk {
			if c == 0 {
				chunk = chunk[:i]
				break
			}
		}
		if len(chunk) == 0 {
			return
		}
		l.buf = append(l.buf, chunk...)
		ofs += len(chunk)
		l.filled = ofs
		if l.buf[ofs-1] == '\n' {
			l.line++
			return
		}
		// As libuci: the buffer doubles after every read that ended
		// without a newline, a NUL-cut one too (byte-compatible output
		// depends on it). libuci's realloc fails long before the size
		// overflows; without that bound doubling overflowed bufsz after
		// ~60 NULs and fgets never read again (a hang); past the bound
		// the rest of the input is given up as unreadable.
		if l.bufsz > maxBufSize {
			l.rd = len(l.data) // the rest is unreadable: as the end of the file
			return
		}
		l.bufsz *= 2
	}
}

// cstr returns the NUL-terminated string starting at i.
func (l *lexer) cstr(i int) string {
	j := i
	for l.at(j) != 0 {
		j++
	}
	if i >= j {
		return ""
	}
	return string(l.buf[i:j])
}

func (l *lexer) skipWhitespace() {
	for c := l.cur(); c != 0 && isSpace(c); c = l.cur() {
		l.pos++
	}
}

// backslash handles a '\' outside single quotes: it returns true if the
// next character is to be taken literally, false if the backslash ended
// the line and the next line was joined in its place.
func (l *lexer) backslash() bool {
	l.pos++
	c := l.cur()
	if c == 0 || c == '\n' || (c == '\r' && l.at(l.pos+1) == '\n' && l.at(l.pos+2) == 0) {
		l.getln(l.pos)
		return false
	}
	return true
}

func (l *lexer) addc(dest *int) {
	l.set(*dest, l.at(l.pos))
	*dest++
	l.pos++
}

func (l *lexer) doubleQuote(target *int) {
	l.pos++
	for {
		switch l.cur() {
		case '"':
			l.pos++
			return
		case 0:
			l.getln(l.pos)
			if l.cur() == 0 {
				l.fail("EOF with unterminated \"")
			}
		case '\\':
			if !l.backslash() {
				continue
			}
			l.addc(target)
		default:
			l.addc(target)
		}
	}
}

func (l *lexer) singleQuote(target *int) {
	l.pos++
	for {
		switch l.cur() {
		case '\'':
			l.pos++
			return
		case 0:
			l.getln(l.pos)
			if l.cur() == 0 {
				l.fail("EOF with unterminated '")
			}
		default:
			l.addc(target)
		}
	}
}

// str parses one word: quoted and bare pieces joined, up to whitespace, a
// '#' (comment) or a ';' (end of statement). The result is written in place
// from *target and NUL-terminated.
func (l *lexer) str(target *int) {
	next := true
loop:
	for {
		switch l.cur() {
		case '\'':
			l.singleQuote(target)
		case '"':
			l.doubleQuote(target)
		case '#':
			l.set(l.pos, 0)
			break loop
		case 0:
			break loop
		case ';':
			next = false
			break loop
		case '\\':
			if l.backslash() {
				l.addc(target)
			}
		default:
			l.addc(target)
		}
		if c := l.cur(); c == 0 || isSpace(c) {
			break
		}
	}
	if l.cur() != 0 && next {
		l.pos++
	}
	l.set(*target, 0)
}

// nextArg extracts the next argument and returns its offset in buf.
func (l *lexer) nextArg(required, name, pkg bool) int {
	l.skipWhitespace()
	val := l.pos
	ptr := l.pos
	if l.cur() == ';' {
		l.set(l.pos, 0)
		l.pos++
	} else {
		l.str(&ptr)
	}
	if l.at(val) == 0 {
		if required {
			l.fail("insufficient arguments")
		}
		return val
	}
	if name && !validStr(l.cstr(val), name, pkg) {
		l.fail("invalid character in name field")
	}
	return val
}

// increasePos skips past the command word strtok terminated.
func (l *lexer) increasePos(add int) bool {
	if l.pos+add > l.filled {
		return false
	}
	l.pos += add
	return true
}

func (l *lexer) strlenFromPos() int {
	n := 0
	for l.at(l.pos+n) != 0 {
		n++
	}
	return n
}

// strtok returns the next word delimited by space or tab (not other
// whitespace) from the current position, NUL-terminating it in place, or
// ok=false at the end of the buffer.
func (l *lexer) strtok() (word string, ok bool) {
	i := l.pos
	for c := l.at(i); c == ' ' || c == '\t'; c = l.at(i) {
		i++
	}
	if l.at(i) == 0 {
		return "", false
	}
	j := i
	for c := l.at(j); c != 0 && c != ' ' && c != '\t'; c = l.at(j) {
		j++
	}
	word = string(l.buf[i:j])
	l.set(j, 0)
	return word, true
}
