package sdk

import (
	"encoding/base64"
	"fmt"
)

// PNGs decodes the result's image/png outputs (every matplotlib figure the
// code drew, in order), so callers can save or show charts without
// handling the base64 transport encoding themselves.
func (r *Result) PNGs() ([][]byte, error) {
	var pngs [][]byte
	for i, o := range r.Outputs {
		if o.MimeType != "image/png" {
			continue
		}
		if o.Encoding != OutputEncodingBase64 {
			return nil, fmt.Errorf("warden: output %d: image/png with encoding %q, want base64", i, o.Encoding)
		}
		b, err := base64.StdEncoding.DecodeString(o.Data)
		if err != nil {
			return nil, fmt.Errorf("warden: decoding output %d (image/png): %w", i, err)
		}
		pngs = append(pngs, b)
	}
	return pngs, nil
}
