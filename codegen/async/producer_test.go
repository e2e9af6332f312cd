package async

import "testing"

// TestConsumerRegs: setmaxnreg.inc asks the CTA's own pool, which ptxas
// sized at entry; the consumers may take what the producer's decrease
// leaves of it, never more.
func TestConsumerRegs(t *testing.T) {
	for _, c := range []struct{ nw, want int }{
		{4, 256},  // 256 threads: 248 at entry, capped at setmaxnreg's 256
		{8, 240},  // 384 threads: 168 at entry (FlashAttention-3's 24 / 240)
		{16, 112}, // 640 threads: 96 at entry
	} {
		got := consumerRegs(c.nw, ProducerRegs)
		threads := c.nw*32 + 128
		pool := min(255, 65536/threads) &^ 7 * threads
		if got != c.want || got*c.nw*32+ProducerRegs*128 > pool {
			t.Errorf("consumerRegs(%d warps) = %d, want %d (within the %d registers at entry)", c.nw, got, c.want, pool)
		}
	}
}
