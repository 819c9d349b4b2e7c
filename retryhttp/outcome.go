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

// Close closes the response's body. Package retry calls it on the outcome
// of a hedged call's attempt that lost (see [retry.HedgeValue]), so that
// the loser's connection is freed; a replayed outcome has nothing to
// close. It does not change what MarshalJSON encodes.
func (o outcome) Close() error {
	if o.resp == nil || o.resp.Body == nil {
		return nil
	}
	return o.resp.Body.Close()
}
