package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	gpt2, _ := ArchConfig("gpt2")
	cases := []struct {
		name string
		json string
		want func(c *Config) // edits applied to the gpt2 config
	}{
		{"defaults are gpt2", `{"model_type":"gpt2"}`, func(c *Config) {}},
		{"hub gpt2 config", `{"activation_function":"gelu_new","architectures":["GPT2LMHeadModel"],"attn_pdrop":0.1,
			"bos_token_id":50256,"embd_pdrop":0.1,"eos_token_id":50256,"initializer_range":0.02,"layer_norm_epsilon":1e-05,
			"model_type":"gpt2","n_ctx":1024,"n_embd":768,"n_head":12,"n_layer":12,"n_positions":1024,"resid_pdrop":0.1,
			"summary_activation":null,"task_specific_params":{"text-generation":{"do_sample":true,"max_length":50}},
			"vocab_size":50257}`, func(c *Config) {}},
		{"n_ctx when no n_positions", `{"model_type":"gpt2","n_ctx":512}`, func(c *Config) { c.NPositions = 512 }},
		{"n_positions wins", `{"model_type":"gpt2","n_ctx":512,"n_positions":256}`, func(c *Config) { c.NPositions = 256 }},
		{"n_inner null", `{"model_type":"gpt2","n_embd":64,"n_head":4,"n_inner":null}`, func(c *Config) { c.NEmbd, c.NHead, c.InnerDim = 64, 4, 256 }},
		{"n_inner set", `{"model_type":"gpt2","n_inner":1000}`, func(c *Config) { c.InnerDim = 1000 }},
		{"pytorch tanh gelu", `{"model_type":"gpt2","activation_function":"gelu_pytorch_tanh"}`, func(c *Config) { c.ActivationFun = "gelu_pytorch_tanh" }},
		// transformers' FastGELUActivation and AccurateGELUActivation compute the same tanh approximation.
		{"fast gelu", `{"model_type":"gpt2","activation_function":"gelu_fast"}`, func(c *Config) { c.ActivationFun = "gelu_fast" }},
		{"accurate gelu", `{"model_type":"gpt2","activation_function":"gelu_accurate"}`, func(c *Config) { c.ActivationFun = "gelu_accurate" }},
		// GPT2Config's attribute_map: PretrainedConfig sets these names onto n_embd, n_positions,
		// n_head and n_layer (configuration_gpt2.py).
		{"attribute_map names", `{"model_type":"gpt2","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":3,"max_position_embeddings":128}`,
			func(c *Config) { c.NEmbd, c.NHead, c.NLayer, c.NPositions, c.InnerDim = 64, 4, 3, 128, 256 }},
		{"attribute_map names agreeing", `{"model_type":"gpt2","n_head":4,"num_attention_heads":4,"n_embd":64,"hidden_size":64}`,
			func(c *Config) { c.NEmbd, c.NHead, c.InnerDim = 64, 4, 256 }},
		{"reorder_and_upcast_attn", `{"model_type":"gpt2","reorder_and_upcast_attn":true,"scale_attn_weights":true}`, func(c *Config) {}},
		{"eps and eos", `{"model_type":"gpt2","layer_norm_epsilon":1e-6,"eos_token_id":7}`, func(c *Config) { c.LayerNormEps, c.EOSTokenID = 1e-6, 7 }},
		// transformers loads these: GPT2Config's default eos_token_id past a small vocabulary (never
		// sampled), a list of one id, null (the default).
		{"default eos past a small vocab", `{"model_type":"gpt2","vocab_size":1000}`, func(c *Config) { c.VocabSize = 1000 }},
		{"eos list of one", `{"model_type":"gpt2","eos_token_id":[7]}`, func(c *Config) { c.EOSTokenID = 7 }},
		{"eos null", `{"model_type":"gpt2","eos_token_id":null}`, func(c *Config) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseConfig("config.json", []byte(c.json))
			if err != nil {
				t.Fatal(err)
			}
			want := gpt2
			c.want(&want)
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct{ name, json, want string }{
		{"not json", `{"model_type":`, "invalid JSON"},
		{"trailing data", `{"model_type":"gpt2"} {}`, "data after"},
		{"wrong type", `{"model_type":"gpt2","n_layer":"twelve"}`, "n_layer"},
		{"missing model_type", `{"n_layer":2}`, "field model_type: missing"},
		{"other model_type", `{"model_type":"llama"}`, `field model_type: "llama" is not supported`},
		{"zero heads", `{"model_type":"gpt2","n_head":0}`, "field n_head: must be positive, got 0"},
		{"negative embd", `{"model_type":"gpt2","n_embd":-8}`, "field n_embd: must be positive, got -8"},
		{"zero vocab", `{"model_type":"gpt2","vocab_size":0}`, "field vocab_size: must be positive"},
		{"zero positions", `{"model_type":"gpt2","n_positions":0}`, "field n_positions: must be positive"},
		{"huge", `{"model_type":"gpt2","vocab_size":100000000000}`, "field vocab_size: 100000000000 exceeds the limit of 16777216"},
		{"n_layer past the limit", `{"model_type":"gpt2","n_layer":16777217}`, "field n_layer: 16777217 exceeds the limit of 16777216"},
		{"n_layer negative", `{"model_type":"gpt2","n_layer":-1}`, "field n_layer: must be positive, got -1"},
		{"n_layer fractional", `{"model_type":"gpt2","n_layer":1e6}`, "invalid JSON"},
		{"n_layer overflows int", `{"model_type":"gpt2","n_layer":1e30}`, "invalid JSON"},
		{"n_head negative", `{"model_type":"gpt2","n_head":-12}`, "field n_head: must be positive, got -12"},
		{"n_head past n_embd", `{"model_type":"gpt2","n_head":1536}`, "field n_embd: 768 is not divisible by n_head 1536"},
		{"n_embd past the limit", `{"model_type":"gpt2","n_embd":33554432,"n_head":1}`, "field n_embd: 33554432 exceeds the limit of 16777216"},
		{"n_inner implied past the limit", `{"model_type":"gpt2","n_embd":8388608,"n_head":1}`, "field n_inner (4*n_embd when unset): 33554432 exceeds the limit"},
		{"n_positions negative", `{"model_type":"gpt2","n_positions":-1024}`, "field n_positions: must be positive, got -1024"},
		{"n_positions past the limit", `{"model_type":"gpt2","n_positions":4294967296}`, "field n_positions: 4294967296 exceeds the limit of 16777216"},
		{"vocab_size negative", `{"model_type":"gpt2","vocab_size":-50257}`, "field vocab_size: must be positive, got -50257"},
		{"too many parameters", `{"model_type":"gpt2","n_layer":16000000,"n_embd":1024,"n_head":16}`, "imply 2.02e+14 parameters, over the limit of 1.1e+12"},
		{"not divisible", `{"model_type":"gpt2","n_embd":100,"n_head":12}`, "field n_embd: 100 is not divisible by n_head 12"},
		{"eos negative", `{"model_type":"gpt2","eos_token_id":-1}`, "field eos_token_id: -1 is not a token id"},
		{"eos past int32", `{"model_type":"gpt2","eos_token_id":4294967296}`, "field eos_token_id: 4294967296 out of range"},
		{"eos list of two", `{"model_type":"gpt2","eos_token_id":[50256,50257]}`, "field eos_token_id: 2 ids [50256 50257]; rosetop stops on one"},
		{"eos text", `{"model_type":"gpt2","eos_token_id":"50256"}`, `field eos_token_id: "50256" is not a token id or a list of them`},
		{"eos object over lines", "{\"model_type\":\"gpt2\",\"eos_token_id\":{\"a\":\n1}}", `field eos_token_id: {"a": 1} is not a token id`},
		{"bad eps", `{"model_type":"gpt2","layer_norm_epsilon":0}`, "field layer_norm_epsilon"},
		{"eps below float32", `{"model_type":"gpt2","layer_norm_epsilon":1e-50}`, "field layer_norm_epsilon: 1e-50 rounds to 0 in float32"},
		{"eps too large", `{"model_type":"gpt2","layer_norm_epsilon":1e300}`, "field layer_norm_epsilon: 1e+300 is not in (0, 1]"},
		{"eps negative", `{"model_type":"gpt2","layer_norm_epsilon":-1e-5}`, "field layer_norm_epsilon: -1e-05 is not in (0, 1]"},
		{"exact gelu", `{"model_type":"gpt2","activation_function":"gelu"}`, `field activation_function: "gelu" is not supported`},
		{"quick gelu", `{"model_type":"gpt2","activation_function":"quick_gelu"}`, `field activation_function: "quick_gelu" is not supported`},
		{"layer-scaled attention", `{"model_type":"gpt2","scale_attn_by_inverse_layer_idx":true}`, "scale_attn_by_inverse_layer_idx"},
		{"unscaled attention", `{"model_type":"gpt2","scale_attn_weights":false}`, "scale_attn_weights"},
		{"n_head and its alias disagree", `{"model_type":"gpt2","n_head":12,"num_attention_heads":16}`, "field n_head: 12, but num_attention_heads is 16"},
		{"n_positions and its alias disagree", `{"model_type":"gpt2","n_positions":1024,"max_position_embeddings":2048}`, "field n_positions: 1024, but max_position_embeddings is 2048"},
		{"untied head", `{"model_type":"gpt2","tie_word_embeddings":false}`, "tie_word_embeddings"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig("/m/config.json", []byte(c.json))
			if err == nil {
				t.Fatal("ParseConfig succeeded")
			}
			msg := err.Error()
			if !errors.Is(err, ErrInvalidModel) || !strings.HasPrefix(msg, "config /m/config.json: ") ||
				!strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming /m/config.json, wrapping ErrInvalidModel, containing %q", msg, c.want)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"model_type":"gpt2","n_layer":4,"n_head":4,"n_embd":32,"n_inner":null}`))
	f.Add([]byte(`{"model_type":"gpt2","n_ctx":512,"eos_token_id":-1}`))
	f.Add([]byte(`{"model_type":"gpt2","n_embd":9223372036854775807,"n_head":-1}`))
	f.Add([]byte(tinyConfigJSON))
	f.Add([]byte(`{"model_type":"gpt2","hidden_size":64,"num_attention_heads":4,"n_head":4,"num_hidden_layers":-3,"max_position_embeddings":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("fuzz", b)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig returned a config that does not validate: %v", err)
		}
		if c.HeadDim()*c.NHead != c.NEmbd || c.Params() <= 0 {
			t.Fatalf("inconsistent config %+v", c)
		}
	})
}
