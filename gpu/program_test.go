//go:build cgo

package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

var update = flag.Bool("update", false, "rewrite testdata/programs.golden")

// setAddresses gives every device address and metadata offset in the struct v points to
// (recursively, through slices of structs) a distinct value derived from its field path, so
// that a program's arguments say which buffer each one is.
func setAddresses(v reflect.Value, path string) {
	v = reflect.Indirect(v)
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			setAddresses(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		for i := range v.Len() {
			setAddresses(v.Index(i).Addr(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Uint64, reflect.Int64:
		h := fnv.New64a()
		h.Write([]byte(path))
		if v.Kind() == reflect.Uint64 {
			v.SetUint(h.Sum64()&0xffffffffff00 | 0x100)
		} else {
			v.SetInt(int64(h.Sum64()&0xffff00 | 0x100))
		}
	}
}

// describe writes each op of p on a line: the kernel, its launch and its arguments' bits, or the
// GEMM and its operands.
func describe(b *strings.Builder, p *program) {
	for _, o := range p.ops {
		switch o.kind {
		case opGEMM, opSplitK:
			fmt.Fprintf(b, "gemm %x %x %x %d %d %d %d\n", o.y, o.x, o.w, o.m, o.in, o.out, o.splits)
		case opLtFC:
			fmt.Fprintf(b, "lt %x %x %x %x %d\n", o.y, o.x, o.w, o.bias, o.fc.algo)
		default:
			cluster := "0"
			switch {
			case o.ex && o.clusterX > 1:
				cluster = fmt.Sprintf("%dx%d", o.clusterX, o.clusterY)
			case o.ex:
				cluster = fmt.Sprint(o.clusterY)
			}
			fmt.Fprintf(b, "%s %d %d %d %d %v %v %s", kernelNames[o.k], o.gx, o.gy, o.block, o.shmem, o.ex, o.pdl, cluster)
			for _, a := range p.args[o.a0:o.a1] {
				fmt.Fprintf(b, " %x", a)
			}
			b.WriteString("\n")
		}
	}
}

// TestStepProgramsGolden builds the programs of every kind of step on every path, for three model
// shapes, on synthetic addresses (setAddresses), and compares a digest of each group's calls,
// arguments included, with testdata/programs.golden: a change to what a step enqueues shows up
// here, on machines without a GPU. Rewrite the golden file with -update when the change is meant.
func TestStepProgramsGolden(t *testing.T) {
	cfgs := []struct {
		name string
		cfg  Config
	}{{"small", smallCfg}, {"fold", foldCfg}, {"gpt2", gpt2Cfg}}
	paths := []struct {
		name string
		caps func(cfg Config) caps
		lt   bool
	}{
		{"cublas", func(Config) caps { return caps{} }, false},
		{"cublas+lt", func(Config) caps { return caps{lt: true} }, true},
		{"small", func(c Config) caps { return caps{small: planLayer(c.NEmbd, c.Inner, 132), smallRows: 32, pdl: true} }, false},
		{"small-wide", func(c Config) caps { return caps{small: planLayer(c.NEmbd, c.Inner, 1), smallRows: 64, pdl: true} }, false},
		{"folded", func(c Config) caps {
			g := planLayer(c.NEmbd, c.Inner, 132)
			return caps{small: g, smallRows: 64, pdl: true, fold: folds(c.NEmbd, g)}
		}, false},
		{"wg", func(c Config) caps {
			g := planLayer(c.NEmbd, c.Inner, 132)
			return caps{small: g, smallRows: 32, pdl: true, fold: folds(c.NEmbd, g), wg: planWGLayer(c.NEmbd, c.Inner), wgRows: 64,
				head: headFits(c.NEmbd), headGrid: headBlocks(132, c.VocabSize)}
		}, false},
		{"folded-nopdl", func(c Config) caps {
			g := planLayer(c.NEmbd, c.Inner, 132)
			return caps{small: g, smallRows: 64, fold: folds(c.NEmbd, g)}
		}, false},
	}
	var got strings.Builder
	for _, c := range cfgs {
		for _, path := range paths {
			for _, paged := range []bool{false, true} {
				s := launchState(c.cfg, paged, path.caps(c.cfg), path.lt)
				s.opt.MaxBatch, s.opt.MaxTokens = 64, 256
				setAddresses(reflect.ValueOf(s.wts), "wts")
				setAddresses(reflect.ValueOf(&s.act), "act")
				setAddresses(reflect.ValueOf(&s.meta), "meta")
				s.kv.buf, s.kv.layerBytes = 1<<40, 1<<24
				var b strings.Builder
				for _, sh := range [][2]int{{1, 1}, {5, 5}, {64, 64}, {10, 3}, {200, 7}} {
					for _, greedy := range []bool{true, false} {
						for _, k := range []stepKind{eagerStep, graphStep, predictedStep} {
							for _, alt := range []bool{false, true} {
								if sh[0] != sh[1] && k != eagerStep || alt && k != predictedStep {
									continue
								}
								p, err := s.newPlan(sh[0], sh[1], greedy, k, alt)
								if err != nil {
									t.Fatal(err)
								}
								fmt.Fprintf(&b, "step %v greedy %v kind %d alt %v\n", sh, greedy, k, alt)
								describe(&b, s.build(&p))
							}
						}
					}
				}
				sum := sha256.Sum256([]byte(b.String()))
				fmt.Fprintf(&got, "%s %s paged=%v %s\n", c.name, path.name, paged, hex.EncodeToString(sum[:8]))
			}
		}
	}
	const golden = "testdata/programs.golden"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got.String() != string(want) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Errorf("programs changed: %q, golden %q", gl[i], wl[i])
			}
		}
		if len(gl) != len(wl) {
			t.Errorf("%d groups, golden has %d", len(gl), len(wl))
		}
		t.Log("if the change is meant, rewrite the golden file: go test ./gpu -run TestStepProgramsGolden -update")
	}
}
