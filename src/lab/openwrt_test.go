package lab

import (
	"strings"
	"testing"
)

func TestBoxNetworkConfig(t *testing.T) {
	cfg := BoxNetworkConfig()
	for _, want := range []string{
		"config interface 'lan'\n\toption device 'br-lan'\n\toption proto 'static'\n\toption ipaddr '198.18.1.1'\n\toption netmask '255.255.255.0'\n\toption ip6addr 'fd00:1::1/64'\n",
		"config interface 'wan'\n\toption device 'pppoe-wan'\n\toption proto 'static'\n\toption ipaddr '198.18.2.2'\n\toption netmask '255.255.255.0'\n\toption gateway '198.18.2.1'\n",
		"option ip6gw 'fd00:2::1'",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("BoxNetworkConfig lacks\n%s\ngot:\n%s", want, cfg)
		}
	}
}

func TestBoxDaemonConfig(t *testing.T) {
	l := &Lab{Prefix: "swltest1", Dir: "/tmp/surflare-lab-swltest1"}
	cfg, err := l.BoxDaemonConfig("surflare.main.mode=global")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"option surflare_bin '/usr/bin/surflare'",
		"option ubus_socket '/var/run/ubus/ubus.sock'",
		"option run_dir '/run'",
		"option mode 'global'",
		"option chnroute_refresh '0'",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("BoxDaemonConfig lacks %q", want)
		}
	}
	if strings.Contains(cfg, "https://") {
		t.Errorf("BoxDaemonConfig points somewhere outside the lab:\n%s", cfg)
	}
}
