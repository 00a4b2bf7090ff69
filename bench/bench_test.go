package bench

import "testing"

// benchWorkload runs every variant of the named workload on every registered
// transport: Benchmark<name>/transport=<t>[/<variant>].
func benchWorkload(b *testing.B, name string) {
	var ws []Workload
	for _, w := range Workloads() {
		if w.Name == name {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		b.Fatalf("no workload %q", name)
	}
	for _, tr := range All() {
		if !tr.runs(ws[0]) {
			continue
		}
		b.Run("transport="+tr.Name, func(b *testing.B) {
			for _, w := range ws {
				if w.Variant == "" {
					w.Fn(b, tr)
					continue
				}
				b.Run(w.Variant, func(b *testing.B) { w.Fn(b, tr) })
			}
		})
	}
}

func BenchmarkBulk1(b *testing.B)          { benchWorkload(b, "Bulk1") }
func BenchmarkBulk1Read(b *testing.B)      { benchWorkload(b, "Bulk1Read") }
func BenchmarkTLSBulk1(b *testing.B)       { benchWorkload(b, "TLSBulk1") }
func BenchmarkTLSStreams64(b *testing.B)   { benchWorkload(b, "TLSStreams64") }
func BenchmarkTLSEcho64(b *testing.B)      { benchWorkload(b, "TLSEcho64") }
func BenchmarkStreams8(b *testing.B)       { benchWorkload(b, "Streams8") }
func BenchmarkStreams64(b *testing.B)      { benchWorkload(b, "Streams64") }
func BenchmarkStreams1024(b *testing.B)    { benchWorkload(b, "Streams1024") }
func BenchmarkEcho64(b *testing.B)         { benchWorkload(b, "Echo64") }
func BenchmarkOpenClose(b *testing.B)      { benchWorkload(b, "OpenClose") }
func BenchmarkInteractive(b *testing.B)    { benchWorkload(b, "Interactive") }
func BenchmarkIdleStreams(b *testing.B)    { benchWorkload(b, "IdleStreams") }
func BenchmarkWANBulk1(b *testing.B)       { benchWorkload(b, "WANBulk1") }
func BenchmarkWANStreams8(b *testing.B)    { benchWorkload(b, "WANStreams8") }
func BenchmarkWANInteractive(b *testing.B) { benchWorkload(b, "WANInteractive") }
func BenchmarkNeverRead(b *testing.B)      { benchWorkload(b, "NeverRead") }
