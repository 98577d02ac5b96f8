package uci

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// OpenWrt's own scripts feed uci through `uci batch` (uci-defaults, LuCI's
// apply, package postinst) and `uci import`, so both follow libuci's
// cli.c and uci_import to the byte, quirks included:
//
//   - a batch line is tokenized like a config line ('…', "…", \, '#'
//     comments), and a ';' ends the command: the rest of that line is
//     dropped, not run;
//   - at most three words per line: the fourth is "Too many arguments";
//   - a parse error (an unterminated quote at the end) is reported with the
//     line counted since the last command that read a config file, because
//     libuci throws its one parse context away on every load;
//   - an unknown command or a wrong argument count is "Unknown command",
//     the batch goes on, and its exit status is 0 whatever failed;
//   - import inside a batch reads the rest of the batch's input.
//
// The input is read whole before the first command runs; uci reads it as
// it goes, which only shows when a writer waits for uci's output before
// writing the next line.

// maxBatchArgs is uci's MAX_ARGS. uci stops with "Too many arguments" when
// it is about to read word number MAX_ARGS+1, so a line holds at most
// MAX_ARGS-1 words.
const maxBatchArgs = 4

// batchExit is what batchCmd returns for `exit`.
const batchExit = 254

// input returns the lexer over batch/import input, reading it on first use.
// A read error ends the input, as fgets's NULL does.
func (r *run) input() *lexer {
	if r.in == nil {
		data, _ := io.ReadAll(r.stdin)
		r.in = newLexer(data)
	}
	return r.in
}

// restart is a new parse context on the same stream: the read position and
// the end-of-file flag belong to the FILE and survive, the line count and
// buffer belong to libuci's context and do not.
func (l *lexer) restart() *lexer {
	return &lexer{data: l.data, rd: l.rd, eof: l.eof}
}

// batch is `uci batch`: one command per input line until EOF or `exit`.
func (r *run) batch() int {
	r.inBatch = true
	defer func() { r.inBatch = false }()
	r.input()
	r.opened = r.store.opened
	for !r.in.eof {
		switch r.batchCmd() {
		case batchExit:
			return 0
		case 255:
			r.cliError("Unknown command\n")
		}
	}
	return 0
}

// batchCmd reads one line's words and runs them.
func (r *run) batchCmd() int {
	if r.opened != r.store.opened {
		r.in, r.opened = r.in.restart(), r.store.opened
	}
	l := r.in
	var argv []string
	tooMany := false
	perr := catchParse(func() {
		l.pos = 0
		l.getln(0)
		for i := 0; ; i++ {
			if i == maxBatchArgs {
				tooMany = true
				return
			}
			v := l.nextArg(false, false, false)
			if l.at(v) == 0 {
				return
			}
			argv = append(argv, l.cstr(v))
		}
	})
	switch {
	case perr != nil:
		r.perror(perr)
		return 0
	case tooMany:
		r.cliError("Too many arguments\n")
		return 1
	case len(argv) == 0:
		return 0
	case strings.EqualFold(argv[0], "exit"):
		return batchExit
	}
	return r.cmd(argv)
}

// importCmd is `uci import [CONFIG]`: read config statements from the
// input and replace each package named by a `package` statement (or the
// one named on the command line) with what was read. With -m the
// statements become pending changes of the existing package instead, as
// if typed as uci set/add_list (no commit). A package that does not exist
// is created; without -m, its pending changes are left as they are.
func (r *run) importCmd(argv []string) int {
	if len(argv) > 2 {
		return 255
	}
	name := ""
	if len(argv) == 2 {
		name = argv[1]
	} else if r.merge {
		return 255 // nothing to merge into
	}
	var into *Package
	if r.merge {
		if p, err := r.store.Load(name); err == nil {
			into = p
		}
	}
	// uci_import starts a parse context of its own on the input and
	// frees it only when it succeeds: a batch that goes on afterwards
	// counts lines from there, or again from 1.
	l := r.input().restart()
	r.in, r.opened = l, -1
	if name != "" && !isPackage(name) {
		r.perror(ErrInval)
		return 1
	}
	p := &parser{lex: l, strict: !r.store.NonStrict, name: name, multi: name == ""}
	if into != nil {
		p.cfg, p.merge = into.Config, &change{record: true}
	}
	err := p.run("-", func(e *ParseError) {
		if r.store.OnParseError != nil {
			r.store.OnParseError(e)
		}
	})
	if err == ErrDuplicate && r.perrorOn {
		r.perrorTo("", err)
	}
	if err != nil {
		r.opened = r.store.opened
	} else {
		err = r.storeImport(p, into)
	}
	if err != nil {
		r.perror(err)
		return 1
	}
	return 0
}

// storeImport saves an import: the merged package's changes, or every
// package read, committed over its file in turn. As in uci, the status is
// the last commit's.
func (r *run) storeImport(p *parser, into *Package) error {
	if into != nil {
		into.pending = append(into.pending, p.merge.deltas...)
		return r.store.Save(into)
	}
	if p.cfg == nil && p.name != "" {
		p.switchConfig() // an empty input still makes an empty package
	}
	configs := p.done
	if p.cfg != nil {
		configs = append(configs, p.cfg)
	}
	var err error
	for _, c := range configs {
		err = r.store.Commit(&Package{Config: c, Path: filepath.Join(r.store.confDir(), c.Name)})
	}
	return err
}

// catchParse runs f and returns the parse error it raised, if any.
func catchParse(f func()) (perr *ParseError) {
	defer func() {
		if x := recover(); x != nil {
			pf, ok := x.(*parseFailure)
			if !ok {
				panic(x)
			}
			perr = &ParseError{Line: pf.line, Byte: pf.byte, Msg: pf.msg}
		}
	}()
	f()
	return nil
}

// cliError is uci's cli_error: a bare message on stderr unless -q.
func (r *run) cliError(msg string) {
	if r.quiet {
		return
	}
	r.out.Flush()
	fmt.Fprint(r.errw, msg)
}
