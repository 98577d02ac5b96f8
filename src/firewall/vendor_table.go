package firewall

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// The vendor's table (`inet surflare`) is not ours: the vendor builds it on
// connect. We only read its server ports and delete it when the vendor
// leaves it behind.

// vendorServerPortsSet is the vendor table's set of its relays' ports.
const vendorServerPortsSet = "server_ports"

// VendorServerPorts reads the vendor table's server_ports set: the ports
// the vendor's relays listen on. It is empty when the table or the set is
// missing (the vendor is not connected). The relay learner, strict-direct
// mode and the node probe all read it here.
func (f *Firewall) VendorServerPorts(ctx context.Context) map[uint16]bool {
	out := map[uint16]bool{}
	c, err := f.conn()
	if err != nil {
		return out
	}
	defer c.CloseLasting()
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: TableVendor}
	set, err := c.GetSetByName(t, vendorServerPortsSet)
	if err != nil {
		return out
	}
	elems, err := c.GetSetElements(set)
	if err != nil {
		return out
	}
	for _, e := range elems {
		if len(e.Key) >= 2 {
			out[binary.BigEndian.Uint16(e.Key[:2])] = true
		}
	}
	return out
}

// FlushVendor deletes `inet surflare` if it exists: a killed or
// half-disconnected vendor leaves it, and its rules would keep marking
// traffic for a proxy that is gone.
func (f *Firewall) FlushVendor(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: TableVendor})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting the vendor table: %w", err)
	}
	return nil
}

// VendorTableExists reports whether `inet surflare` is there: the vendor
// builds it on connect, so a connected vendor without it is broken (health
// layer 1).
func (f *Firewall) VendorTableExists(ctx context.Context) (bool, error) {
	c, err := f.conn()
	if err != nil {
		return false, err
	}
	defer c.CloseLasting()
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("listing tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == TableVendor {
			return true, nil
		}
	}
	return false, nil
}
