package watchdog

import (
	"slices"
	"testing"
	"time"
)

func TestBackoffDoublesAndCaps(t *testing.T) {
	var got []time.Duration
	for i := 1; i <= 7; i++ {
		got = append(got, backoff(3*time.Second, time.Minute, i))
	}
	want := []time.Duration{3, 6, 12, 24, 48, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if !slices.Equal(got, want) {
		t.Errorf("backoff = %v, want %v", got, want)
	}
}
