package targets

import "github.com/rendermac/rendermac/harness/model"

func simVariant(m string) model.Variant { return model.Variant(m) }
