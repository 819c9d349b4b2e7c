package retryhttp

import (
	"encoding/json"
	"strconv"
)

// MarshalJSON encodes the response's status alone, which is what a
// Retrier with an idempotency store keeps of a request that completed:
// the response itself, body and all, is the caller's.
func (o outcome) MarshalJSON() ([]byte, error) {
	code := o.status
	if o.resp != nil {
		code = o.resp.StatusCode
	}
	return []byte(`{"status":` + strconv.Itoa(code) + `}`), nil
}

// UnmarshalJSON decodes what MarshalJSON encoded: a replayed outcome.
func (o *outcome) UnmarshalJSON(b []byte) error {
	var v struct {
		Status int `json:"status"`
	}
	err := json.Unmarshal(b, &v)
	o.resp, o.status = nil, v.Status
	return err
}
