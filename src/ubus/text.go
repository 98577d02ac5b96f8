package ubus

import (
	"encoding/json"
	"fmt"
	"io"
)

// The text forms of OpenWrt's ubus CLI, so `surflare-watchdog ubus` can be
// compared with it line by line.

// WriteList prints objects as `ubus -v list` does: "'path' @id", then one
// line per method, in wire order, with its arguments' types.
func WriteList(w io.Writer, objs []ObjectInfo) {
	for _, o := range objs {
		fmt.Fprintf(w, "'%s' @%08x\n", o.Path, o.ID)
		for _, m := range o.Signature {
			args := map[string]string{}
			for _, a := range m.Value.Items {
				args[a.Name] = BlobmsgType(a.Value.Int).String()
			}
			b, _ := json.Marshal(args)
			fmt.Fprintf(w, "\t%q:%s\n", m.Name, b)
		}
	}
}

// WriteEvent prints an event as `ubus listen` does: { "name": {data} }.
func WriteEvent(w io.Writer, e Event) {
	b, _ := json.Marshal(e.Data)
	fmt.Fprintf(w, "{ %q: %s }\n", e.Name, b)
}

// WriteJSON prints a reply as `ubus call` does: JSON indented with tabs.
func WriteJSON(w io.Writer, fs Fields) error {
	b, err := json.MarshalIndent(fs, "", "\t")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
