package firewall

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LoadChnroute reads a chnroute file: one prefix (or bare address) per line,
// '#' comments and blank lines ignored. Errors name the file and line.
func LoadChnroute(path string) ([]netip.Prefix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading chnroute: %w", err)
	}
	defer f.Close()
	return ParseChnroute(path, f)
}

// ParseChnroute is LoadChnroute on a reader; name is used in errors.
func ParseChnroute(name string, r io.Reader) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %q is not a prefix or address", name, line, s))
				if len(errs) >= 10 {
					break
				}
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return out, errors.Join(errs...)
}

// SplitFamilies separates IPv4 and IPv6 prefixes.
func SplitFamilies(ps []netip.Prefix) (v4, v6 []netip.Prefix) {
	for _, p := range ps {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return v4, v6
}

// DefaultAPNICURL is the registry's delegated-format statistics file.
const DefaultAPNICURL = "https://ftp.apnic.net/stats/apnic/delegated-apnic-latest"

// ParseAPNIC extracts the prefixes of one country from APNIC delegated-format
// data (`apnic|CN|ipv4|1.0.1.0|256|20110414|allocated`): IPv4 records give a
// start and an address count (not always a power of two, so one record may
// yield several prefixes); IPv6 records give a start and a prefix length.
func ParseAPNIC(r io.Reader, country string) (v4, v6 []netip.Prefix, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if s == "" || s[0] == '#' {
			continue
		}
		f := strings.Split(s, "|")
		if len(f) < 7 || f[1] != country || f[6] == "summary" {
			continue
		}
		switch f[2] {
		case "ipv4":
			start, err1 := netip.ParseAddr(f[3])
			n, err2 := strconv.ParseUint(f[4], 10, 32)
			if err1 != nil || err2 != nil || !start.Is4() || n == 0 {
				return nil, nil, fmt.Errorf("line %d: bad ipv4 record %q", line, s)
			}
			ps, err := rangeToPrefixes(start, n)
			if err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", line, err)
			}
			v4 = append(v4, ps...)
		case "ipv6":
			start, err1 := netip.ParseAddr(f[3])
			bits, err2 := strconv.Atoi(f[4])
			if err1 != nil || err2 != nil || !start.Is6() || bits < 0 || bits > 128 {
				return nil, nil, fmt.Errorf("line %d: bad ipv6 record %q", line, s)
			}
			v6 = append(v6, netip.PrefixFrom(start, bits).Masked())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading APNIC data: %w", err)
	}
	return v4, v6, nil
}

// rangeToPrefixes covers n IPv4 addresses from start with the fewest prefixes.
func rangeToPrefixes(start netip.Addr, n uint64) ([]netip.Prefix, error) {
	b := start.As4()
	cur := uint64(binary.BigEndian.Uint32(b[:]))
	end := cur + n
	if end > 1<<32 {
		return nil, fmt.Errorf("range %s+%d runs past the end of IPv4", start, n)
	}
	var out []netip.Prefix
	for cur < end {
		// The largest block aligned at cur that ends no later than end.
		bits := 32
		for bits > 0 {
			block := uint64(1) << (32 - bits + 1)
			if cur%block != 0 || cur+block > end {
				break
			}
			bits--
		}
		binary.BigEndian.PutUint32(b[:], uint32(cur))
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(b), bits))
		cur += uint64(1) << (32 - bits)
	}
	return out, nil
}

// FetchAPNIC downloads and parses the delegated file for country.
func FetchAPNIC(ctx context.Context, client *http.Client, url, country string) (v4, v6 []netip.Prefix, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("chnroute url: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("fetching %s: %s", url, resp.Status)
	}
	v4, v6, err = ParseAPNIC(io.LimitReader(resp.Body, 64<<20), country)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", url, err)
	}
	if len(v4) == 0 {
		return nil, nil, fmt.Errorf("%s: no IPv4 records for %s (not a delegated-format file?)", url, country)
	}
	return v4, v6, nil
}

// UpdateChnroute fetches country's prefixes from url (APNIC delegated
// format) and writes them to out4 and out6 (`surflare-watchdog routes
// update`); a failed download leaves the old files as they were.
func UpdateChnroute(ctx context.Context, client *http.Client, url, country, out4, out6 string) (n4, n6 int, err error) {
	v4, v6, err := FetchAPNIC(ctx, client, url, country)
	if err != nil {
		return 0, 0, err
	}
	if err := WriteChnroute(out4, v4); err != nil {
		return 0, 0, err
	}
	if err := WriteChnroute(out6, v6); err != nil {
		return len(v4), 0, err
	}
	return len(v4), len(v6), nil
}

// WriteChnroute writes prefixes one per line, atomically: a temporary file
// in the same directory, synced, then renamed over the old one, so a reader
// (or a power cut) never sees half a list.
func WriteChnroute(path string, ps []netip.Prefix) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	w := bufio.NewWriter(tmp)
	for _, p := range ps {
		fmt.Fprintln(w, p)
	}
	if err := w.Flush(); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
