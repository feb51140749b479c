//go:build cgo

package gpu

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rosetop/gpu/cu"
)

// ptxEntry matches a kernel's .entry and its parameter list in PTX.
var ptxEntry = regexp.MustCompile(`\.entry (\w+)\(([^)]*)\)`)

// ptxParams returns each kernel of a PTX module with the types of its parameters, in order
// (".u64", ".u32", ".f32", or ".align 128 .b8[128]" for a tensor map); PTX ISA, "Kernel Function
// Parameters".
func ptxParams(t *testing.T, ptx string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range ptxEntry.FindAllStringSubmatch(ptx, -1) {
		var types []string
		for _, line := range strings.Split(m[2], "\n") {
			f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), ","))
			if len(f) == 0 {
				continue
			}
			switch {
			case len(f) == 3 && f[0] == ".param":
				types = append(types, f[1])
			case len(f) == 5 && f[0] == ".param" && f[1] == ".align" && strings.HasSuffix(f[4], "]"): // .align A .b8 NAME[N]
				types = append(types, fmt.Sprintf(".align %s %s%s", f[2], f[3], f[4][strings.Index(f[4], "["):]))
			default:
				t.Fatalf("kernel %s: parameter %q is neither .param TYPE NAME nor .param .align A TYPE NAME[N]", m[1], line)
			}
		}
		out[m[1]] = types
	}
	return out
}

// ptxType is the PTX parameter type each kind of argument fills.
var ptxType = map[cu.ArgKind]string{cu.U64: ".u64", cu.U32: ".u32", cu.F32: ".f32", cu.TensorMap: ".align 128 .b8[128]"}

// TestPTXParams reads a parameter list as nvcc writes it.
func TestPTXParams(t *testing.T) {
	ptx := ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .align 128 .b8 k_param_1[128],\n\t.param .u32 k_param_2,\n" +
		"\t.param .f32 k_param_3\n)\n{\n}\n" + ".visible .entry none(\n\n)\n{\n}\n"
	got := ptxParams(t, ptx)
	if !slices.Equal(got["k"], []string{".u64", ".align 128 .b8[128]", ".u32", ".f32"}) || len(got["none"]) != 0 || len(got) != 2 {
		t.Fatalf("parsed %v", got)
	}
}

// launchState is a runner's state with no device, as far as building programs needs: addresses
// are zero, the shapes real.
func launchState(cfg Config, paged bool, c caps, lt bool) *state {
	s := &state{cfg: cfg, opt: Options{MaxBatch: 8, MaxSeqLen: 64, MaxTokens: 64, Paged: paged}, caps: c}
	s.wts = &devWeights{layers: make([]devLayer, cfg.NLayer)}
	s.kv = kvPool{bs: 16, width: 4, numBlocks: 32}
	if lt {
		s.lt = &ltGEMMs{plans: map[int]*ltPlan{}}
		for _, m := range gemmRowClasses(2048) {
			s.lt.plans[m] = &ltPlan{}
		}
	}
	return s
}

// TestLaunchersMatchPTX builds the program of every kind of step on every path (cuBLAS with and
// without cuBLASLt, small_gemm, folded norms; paged and contiguous; prefill and decode; each
// sampler; eager, graph and queued steps), and the launches outside steps (tables_refresh, the
// spin kernel). Every launch's arguments must have its kernel's PTX parameter types, in order,
// and every kernel must be launched by some program.
func TestLaunchersMatchPTX(t *testing.T) {
	params := map[string][]string{}
	mods := map[string]module{}
	wgPTX, err := os.ReadFile("kernels/gemm_sm90a.ptx") // never loaded, so not embedded
	if err != nil {
		t.Fatal(err)
	}
	for mod, ptx := range map[module]string{modGPT2: ptxGPT2, modSample: ptxSample, modGEMM: ptxGEMM, modWG: string(wgPTX)} {
		for k, v := range ptxParams(t, ptx) {
			params[k], mods[k] = v, mod
		}
	}
	launched := map[kernelID]bool{}
	check := func(what string, p *program) {
		t.Helper()
		if p.err != nil {
			t.Fatalf("%s: %v", what, p.err)
		}
		for _, o := range p.ops {
			if o.kind != opLaunch {
				continue
			}
			name := kernelNames[o.k]
			want, ok := params[name]
			if !ok || mods[name] != o.k.module() {
				t.Fatalf("%s: kernel %s is not in module %d's PTX", what, name, o.k.module())
			}
			var got []string
			for _, a := range p.args[o.a0:o.a1] {
				got = append(got, ptxType[a.Kind])
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: %s (%s) is launched with %v, its PTX takes %v", what, name, o.name, got, want)
			}
			launched[o.k] = true
		}
	}
	wide := foldCfg // warp-per-row norms, folded norms
	sliceCfg := Config{NLayer: 2, NHead: 16, NEmbd: 1024, NPositions: 128, VocabSize: 1000, Inner: 4096, Eps: 1e-5}
	paths := []struct {
		name string
		cfg  Config
		caps caps
		lt   bool
	}{
		{"cuBLAS", smallCfg, caps{}, false},
		{"cuBLAS + cuBLASLt", smallCfg, caps{lt: true}, true},
		{"small_gemm", smallCfg, caps{small: planLayer(smallCfg.NEmbd, smallCfg.Inner, 132), smallRows: 64, pdl: true}, false},
		{"cuBLAS, warp rows", wide, caps{}, false},
		// One multiprocessor: the plans take small_gemm's widest blocks (2 n8 tiles a warp).
		{"small_gemm, warp rows, wide blocks", wide, caps{small: planLayer(wide.NEmbd, wide.Inner, 1), smallRows: 64, pdl: true}, false},
		{"folded", wide, caps{small: planLayer(wide.NEmbd, wide.Inner, 132), smallRows: 64, pdl: true, fold: true}, false},
		{"folded, wide blocks", wide, caps{small: planLayer(wide.NEmbd, wide.Inner, 1), smallRows: 64, pdl: true, fold: true}, false},
		// small_gemm for 1-2 rows, wg_gemm above; wg_gemm alone.
		{"wg_gemm", wide, caps{small: planLayer(wide.NEmbd, wide.Inner, 132), smallRows: 2, fold: true, wg: planWGLayer(wide.NEmbd, wide.Inner),
			wgRows: 64, pdl: true}, false},
		{"wg_gemm only", wide, caps{wg: planWGLayer(wide.NEmbd, wide.Inner), wgRows: 64, pdl: true}, false},
		// A width past two warpgroups' K: every GEMM over K slices, in blocks of 64 columns.
		{"wg_gemm, K sliced", sliceCfg, caps{wg: planWGLayer(sliceCfg.NEmbd, sliceCfg.Inner), wgRows: 64, pdl: true}, false},
		{"wg_gemm, K whole", wide, caps{wg: fcWhole(planWGLayer(wide.NEmbd, wide.Inner)), wgRows: 64, pdl: true}, false},
		{"wg_gemm, LM head with its argmax", wide, caps{wg: planWGLayer(wide.NEmbd, wide.Inner), wgRows: 64, pdl: true, head: true,
			headGrid: headBlocks(132, wide.VocabSize)}, false},
	}
	for _, path := range paths {
		if path.caps.smallRows > 0 && !path.caps.small.on || path.caps.wgRows > 0 && !path.caps.wg.on {
			t.Fatalf("%s: no small_gemm or wg_gemm plans for %+v", path.name, path.cfg)
		}
		for _, paged := range []bool{false, true} {
			s := launchState(path.cfg, paged, path.caps, path.lt)
			for _, shape := range [][2]int{{4, 4}, {10, 3}, {8, 8}} { // {8, 8}: decode steps whose X comes by tensor copies
				for _, greedy := range []bool{true, false} {
					for _, k := range []stepKind{eagerStep, graphStep, predictedStep} {
						p, err := s.newPlan(shape[0], shape[1], greedy, k, k == predictedStep)
						if err != nil {
							t.Fatal(err)
						}
						check(fmt.Sprintf("%s, paged %v, %d rows of %d sequences, greedy %v, kind %d", path.name, paged, shape[0], shape[1],
							greedy, k), s.build(&p))
					}
				}
			}
			var other program
			s.tablesRefresh(&other, 3)
			other.spin(1)
			other.packHead(s.wts, path.cfg.NEmbd, path.cfg.VocabSize)
			check(path.name+": tables refresh, spin, pack head", &other)
		}
	}
	for k := range numKernels {
		if !launched[k] {
			t.Errorf("kernel %s is launched by no program checked here", kernelNames[k])
		}
	}
}

// fcWhole is g with the MLP's first GEMM keeping K whole in blocks of 32 columns, in the narrow
// and the wide plans alike.
func fcWhole(g wgGEMMs) wgGEMMs {
	g.fc = wgPlan{cn: 1, splits: 1, bn: wgWholeBN}
	g.wide.fc = g.fc
	return g
}
