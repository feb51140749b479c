package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"rosetop/internal/oneline"
	"rosetop/internal/regular"
)

// configJSON is the subset of a Hugging Face GPT-2 config.json rosetop reads. Pointers tell a
// missing field (take the default) from an explicit zero (an error).
type configJSON struct {
	ModelType        string   `json:"model_type"`
	NLayer           *int     `json:"n_layer"`
	NHead            *int     `json:"n_head"`
	NEmbd            *int     `json:"n_embd"`
	NPositions       *int     `json:"n_positions"`
	NCtx             *int     `json:"n_ctx"` // older configs
	VocabSize        *int     `json:"vocab_size"`
	LayerNormEpsilon *float64 `json:"layer_norm_epsilon"`
	EOSTokenID       eosID    `json:"eos_token_id"`
	NInner           *int     `json:"n_inner"` // null: 4*n_embd
	Activation       *string  `json:"activation_function"`
	// GPT2Config's attribute_map: other names of n_embd, n_head, n_layer and n_positions.
	HiddenSize            *int `json:"hidden_size"`
	NumAttentionHeads     *int `json:"num_attention_heads"`
	NumHiddenLayers       *int `json:"num_hidden_layers"`
	MaxPositionEmbeddings *int `json:"max_position_embeddings"`
	// Variants of the architecture the engine does not implement; refused rather than run wrong.
	// (reorder_and_upcast_attn is not among them: it only moves attention scores to fp32, where
	// both backends compute them already.)
	ScaleAttnWeights        *bool `json:"scale_attn_weights"`
	ScaleAttnByInverseLayer *bool `json:"scale_attn_by_inverse_layer_idx"`
	AddCrossAttention       *bool `json:"add_cross_attention"`
	TieWordEmbeddings       *bool `json:"tie_word_embeddings"`
}

// maxConfigBytes bounds config.json: GPT-2's is under a kilobyte, the longest hub configs a few.
const maxConfigBytes = 1 << 20

// LoadConfig reads and validates a GPT-2 config.json, a regular file of at most 1 MiB.
func LoadConfig(path string) (Config, error) {
	b, err := regular.ReadFile(path, maxConfigBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := danglingLink("config", path, ErrInvalidModel); err != nil {
			return Config{}, err
		}
		return Config{}, fmt.Errorf("config %s: %w: file does not exist (a model directory needs config.json)", path, ErrInvalidModel)
	case err != nil:
		return Config{}, fmt.Errorf("config %s: %w: %w", path, ErrInvalidModel, err)
	}
	return ParseConfig(path, b)
}

// ParseConfig parses config.json bytes; name labels errors (usually the file's path).
func ParseConfig(name string, b []byte) (Config, error) {
	var j configJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&j); err != nil {
		return Config{}, fmt.Errorf("config %s: %w: invalid JSON: %v", name, ErrInvalidModel, err)
	}
	if dec.More() {
		return Config{}, fmt.Errorf("config %s: %w: invalid JSON: data after the top-level object", name, ErrInvalidModel)
	}
	c, err := j.config()
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", name, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", name, err)
	}
	return c, nil
}

// config fills defaults the way transformers' GPT2Config does and rejects unsupported variants.
func (j *configJSON) config() (Config, error) {
	unsupported := func(field string, v any) error {
		return fmt.Errorf("%w: field %s: %v is not supported (rosetop runs the standard GPT-2 architecture)", ErrInvalidModel, field, v)
	}
	if j.ModelType == "" {
		return Config{}, fmt.Errorf("%w: field model_type: missing (want \"gpt2\")", ErrInvalidModel)
	}
	if j.ModelType != "gpt2" {
		return Config{}, fmt.Errorf("%w: field model_type: %q is not supported (want \"gpt2\")", ErrInvalidModel, j.ModelType)
	}
	switch {
	case j.ScaleAttnWeights != nil && !*j.ScaleAttnWeights:
		return Config{}, unsupported("scale_attn_weights", false)
	case j.ScaleAttnByInverseLayer != nil && *j.ScaleAttnByInverseLayer:
		return Config{}, unsupported("scale_attn_by_inverse_layer_idx", true)
	case j.AddCrossAttention != nil && *j.AddCrossAttention:
		return Config{}, unsupported("add_cross_attention", true)
	case j.TieWordEmbeddings != nil && !*j.TieWordEmbeddings:
		return Config{}, unsupported("tie_word_embeddings", false)
	}
	c := Config{
		ModelType: j.ModelType, NLayer: 12, NHead: 12, NEmbd: 768, NPositions: 1024, VocabSize: 50257,
		LayerNormEps: 1e-5, EOSTokenID: 50256, ActivationFun: "gelu_new",
	}
	set := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	set(&c.NLayer, j.NLayer)
	set(&c.NHead, j.NHead)
	set(&c.NEmbd, j.NEmbd)
	set(&c.NPositions, j.NCtx)
	set(&c.NPositions, j.NPositions) // n_positions wins over the older n_ctx
	set(&c.VocabSize, j.VocabSize)
	if err := j.aliases(&c); err != nil {
		return Config{}, err
	}
	if j.LayerNormEpsilon != nil {
		// Checked before the float32 conversion, so that the message shows the file's value.
		e := *j.LayerNormEpsilon
		c.LayerNormEps = float32(e)
		switch {
		case !(e > 0) || e > 1:
			return Config{}, fmt.Errorf("%w: field layer_norm_epsilon: %g is not in (0, 1]", ErrInvalidModel, e)
		case c.LayerNormEps == 0:
			return Config{}, fmt.Errorf("%w: field layer_norm_epsilon: %g rounds to 0 in float32", ErrInvalidModel, e)
		}
	}
	if id, err := j.EOSTokenID.id(); err != nil {
		return Config{}, err
	} else if id != nil {
		c.EOSTokenID = int32(*id)
		if int(c.EOSTokenID) != *id {
			return Config{}, fmt.Errorf("%w: field eos_token_id: %d out of range", ErrInvalidModel, *id)
		}
	}
	c.InnerDim = 4 * c.NEmbd
	set(&c.InnerDim, j.NInner)
	if j.Activation != nil {
		c.ActivationFun = *j.Activation
	}
	return c, nil
}

// eosID is eos_token_id as configs give it: a number, null, or a list of numbers (the ids any of
// which ends generation in transformers); the engine stops on one id, so a list must hold one.
type eosID struct{ raw json.RawMessage }

func (e *eosID) UnmarshalJSON(b []byte) error {
	e.raw = append(json.RawMessage(nil), b...)
	return nil
}

// id is the one EOS id given; nil when none is (absent, null or an empty list: the default stays).
func (e eosID) id() (*int, error) {
	if len(e.raw) == 0 || string(e.raw) == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(e.raw, &one); err == nil {
		return &one, nil
	}
	var list []int
	if err := json.Unmarshal(e.raw, &list); err != nil {
		return nil, fmt.Errorf("%w: field eos_token_id: %s is not a token id or a list of them", ErrInvalidModel, oneline.Clip(oneline.Fold(string(e.raw)), 40))
	}
	switch len(list) {
	case 0:
		return nil, nil
	case 1:
		return &list[0], nil
	}
	return nil, fmt.Errorf("%w: field eos_token_id: %d ids %s; rosetop stops on one: keep one in the list", ErrInvalidModel, len(list),
		oneline.Clip(fmt.Sprint(list), 60))
}

// aliases applies attribute_map's names, which PretrainedConfig sets onto the same fields; a
// config giving both names different values is refused rather than one of them guessed.
func (j *configJSON) aliases(c *Config) error {
	for _, a := range []struct {
		name, alias string
		v, av       *int
		dst         *int
	}{
		{"n_embd", "hidden_size", j.NEmbd, j.HiddenSize, &c.NEmbd},
		{"n_head", "num_attention_heads", j.NHead, j.NumAttentionHeads, &c.NHead},
		{"n_layer", "num_hidden_layers", j.NLayer, j.NumHiddenLayers, &c.NLayer},
		{"n_positions", "max_position_embeddings", j.NPositions, j.MaxPositionEmbeddings, &c.NPositions},
	} {
		switch {
		case a.av == nil:
		case a.v != nil && *a.v != *a.av:
			return fmt.Errorf("%w: field %s: %d, but %s is %d (two names of one setting)", ErrInvalidModel, a.name, *a.v, a.alias, *a.av)
		default:
			*a.dst = *a.av
		}
	}
	return nil
}

// Limits of Validate: any one size, and the parameter count the sizes imply.
const (
	maxDim    = 1 << 24
	maxParams = 1 << 40
)

// Validate checks that c describes a GPT-2 the engine can run. It bounds the sizes only; whether
// they match the weights file and fit the machine is checked at load.
func (c Config) Validate() error {
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("%w: field %s: %s", ErrInvalidModel, field, fmt.Sprintf(format, args...))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"n_layer", c.NLayer}, {"n_head", c.NHead}, {"n_embd", c.NEmbd}, {"n_positions", c.NPositions},
		{"vocab_size", c.VocabSize}, {"n_inner (4*n_embd when unset)", c.InnerDim}} {
		if f.v <= 0 {
			return bad(f.name, "must be positive, got %d", f.v)
		}
		// Bound every size so that products like V*C cannot overflow and a typo cannot ask for
		// petabytes: the limit is far above any GPT-2 dimension.
		if f.v > maxDim {
			return bad(f.name, "%d exceeds the limit of %d", f.v, maxDim)
		}
	}
	// Products of the sizes must not overflow either (Params, buffer sizes): estimate in float64.
	C, I := float64(c.NEmbd), float64(c.InnerDim)
	if p := (float64(c.VocabSize)+float64(c.NPositions))*C + float64(c.NLayer)*(4*C*C+2*C*I+9*C+I); p > maxParams {
		return fmt.Errorf("%w: n_layer %d, n_embd %d, n_inner %d, n_positions %d and vocab_size %d imply %.3g parameters, over the limit of %.3g",
			ErrInvalidModel, c.NLayer, c.NEmbd, c.InnerDim, c.NPositions, c.VocabSize, p, float64(maxParams))
	}
	if c.NEmbd%c.NHead != 0 {
		return bad("n_embd", "%d is not divisible by n_head %d", c.NEmbd, c.NHead)
	}
	if !(c.LayerNormEps > 0) || c.LayerNormEps > 1 {
		return bad("layer_norm_epsilon", "%g is not in (0, 1]", c.LayerNormEps)
	}
	// An id past the vocabulary is never sampled (transformers loads such a config: GPT2Config's
	// default 50256 with a smaller vocab_size): generation then runs to its length.
	if c.EOSTokenID < 0 {
		return bad("eos_token_id", "%d is not a token id", c.EOSTokenID)
	}
	switch c.ActivationFun {
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate": // transformers' names of the tanh approximation
	default:
		return bad("activation_function", "%q is not supported (want gelu_new, gelu_pytorch_tanh, gelu_fast or gelu_accurate, GELU's tanh approximation)", c.ActivationFun)
	}
	return nil
}

// Params counts the model's parameters (the LM head is tied to wte and not counted twice).
func (c Config) Params() int {
	C, I := c.NEmbd, c.InnerDim
	perLayer := 2*C + C*3*C + 3*C + C*C + C + 2*C + C*I + I + I*C + C
	return c.VocabSize*C + c.NPositions*C + c.NLayer*perLayer + 2*C
}
