package engine

// Config holds the GPT-2 hyperparameters read from config.json.
type Config struct {
	ModelType     string  // "gpt2"
	NLayer        int     // transformer blocks (L)
	NHead         int     // attention heads (NH)
	NEmbd         int     // channels (C)
	NPositions    int     // maximum sequence length (T)
	VocabSize     int     // vocabulary (V)
	LayerNormEps  float32 // layer_norm_epsilon
	EOSTokenID    int32   // eos_token_id (50256 for GPT-2)
	InnerDim      int     // n_inner, 4*C when unset
	ActivationFun string  // "gelu_new" (tanh approximation)
}

// HeadDim is the size of one attention head.
func (c Config) HeadDim() int { return c.NEmbd / c.NHead }

// Weights holds every GPT-2 parameter as float32 in Hugging Face layout. Conv1D weights are
// stored [in, out] (y = x W + b). The LM head is tied to WTE. For F32 files the slices alias the
// memory-mapped file (no copy); F16/BF16 files are converted once at load.
type Weights struct {
	WTE    []float32 // (V, C) token embedding, also the LM head
	WPE    []float32 // (T, C) position embedding
	Layers []LayerWeights
	LNFW   []float32 // (C) final layer norm weight
	LNFB   []float32 // (C) final layer norm bias
}

// LayerWeights are one transformer block's parameters.
type LayerWeights struct {
	LN1W, LN1B []float32 // (C)
	AttnW      []float32 // (C, 3C) attn.c_attn.weight: q, k, v columns in that order
	AttnB      []float32 // (3C)
	AttnProjW  []float32 // (C, C) attn.c_proj.weight
	AttnProjB  []float32 // (C)
	LN2W, LN2B []float32 // (C)
	FCW        []float32 // (C, 4C) mlp.c_fc.weight
	FCB        []float32 // (4C)
	FCProjW    []float32 // (4C, C) mlp.c_proj.weight
	FCProjB    []float32 // (C)
}
