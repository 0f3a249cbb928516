// Writes small real Go profiles (heap, heap2, allocs, cpu, goroutine) for crdscale tests:
//   cd scripts/go_sample_profiles && go run main.go OUTDIR
// Deep recursion, inlined calls and maps exercise inlined frames and stack depth.
package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

var sink [][]byte
var keep []map[string]string

//go:noinline
func allocBytes(n int) []byte { return make([]byte, n) }

func small(n int) []byte { return make([]byte, n) } // inlinable

//go:noinline
func deep(d, n int) {
	if d == 0 {
		sink = append(sink, allocBytes(n))
		sink = append(sink, small(n/2))
		return
	}
	deep(d-1, n)
}

//go:noinline
func maps(k int) {
	m := map[string]string{}
	for i := 0; i < k; i++ {
		m[strings.Repeat("x", i%50+1)+string(rune(i))] = "v"
	}
	keep = append(keep, m)
}

//go:noinline
func burn(d time.Duration) int {
	t := time.Now()
	x := 0
	for time.Since(t) < d {
		for i := 0; i < 1000; i++ {
			x += i * i % 7
		}
	}
	return x
}

func main() {
	runtime.MemProfileRate = 512
	out := os.Args[1]
	if err := os.MkdirAll(out, 0o755); err != nil {
		panic(err)
	}
	f, _ := os.Create(out + "/cpu.pb.gz")
	pprof.StartCPUProfile(f)
	for i := 0; i < 300; i++ {
		deep(i%45, 100+i*37)
		maps(i % 90)
	}
	for i := 0; i < 100; i++ {
		go func() { time.Sleep(time.Hour) }()
	}
	burn(300 * time.Millisecond)
	pprof.StopCPUProfile()
	f.Close()
	runtime.GC()
	for _, k := range []string{"heap", "allocs", "goroutine"} {
		g, _ := os.Create(out + "/" + k + ".pb.gz")
		pprof.Lookup(k).WriteTo(g, 0)
		g.Close()
	}
	sink = sink[:len(sink)/2]
	runtime.GC()
	g, _ := os.Create(out + "/heap2.pb.gz")
	pprof.Lookup("heap").WriteTo(g, 0)
	g.Close()
}
