package firewall

import (
	"fmt"
	"strings"

	"github.com/google/nftables"
)

// vendorExtension is what global mode adds to the vendor's inet surflare
// table: the cn_direct sets and, first in each of its prerouting and output
// base chains, an accept for them, so domestic destinations are neither
// marked nor proxied while everything else is.
func vendorSets(s Spec) []setSpec {
	return []setSpec{
		{name: SetVendorCNDirect, kind: kindIPv4, interval: true, ranges: prefixesOf(s.CNDirect4, false)},
		{name: SetVendorCN6, kind: kindIPv6, interval: true, ranges: prefixesOf(s.CNDirect6, true)},
	}
}

func vendorRules() []rule {
	return []rule{
		newRule(famInet, "sw-cn-direct4").addrLookup(false, false, SetVendorCNDirect).accept(),
		newRule(famInet, "sw-cn-direct6").addrLookup(true, false, SetVendorCN6).accept(),
	}
}

// vendorHooked reports whether a vendor chain gets our accepts.
func vendorHooked(c *nftables.Chain) bool {
	if c.Hooknum == nil {
		return false
	}
	return *c.Hooknum == *nftables.ChainHookPrerouting || *c.Hooknum == *nftables.ChainHookOutput
}

func renderVendorExtension(s Spec) string {
	var b strings.Builder
	for _, set := range vendorSets(s) {
		fmt.Fprintf(&b, "add set inet %s %s { type %s; flags interval; }\n", TableVendor, set.name, set.kind.datatype().Name)
		if e := set.elementTexts(); len(e) > 0 {
			fmt.Fprintf(&b, "add element inet %s %s { %s }\n", TableVendor, set.name, strings.Join(e, ", "))
		}
	}
	rs := vendorRules()
	for i := len(rs) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "insert rule inet %s <chain> %s comment %q\n", TableVendor, rs[i].text, rs[i].comment())
	}
	return b.String()
}
