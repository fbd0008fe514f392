package client

import (
	"context"

	"github.com/desk-runtime/desk"
)

// DecidePlan answers a plan card: decision is "approve", "decline" or
// "revise" (which needs notes saying what to change). A decided card
// answers conflict.
func (c *Client) DecidePlan(ctx context.Context, pln, decision, notes string) (*desk.Plan, error) {
	in := desk.PlanDecision{Notes: notes}
	var out desk.Plan
	if err := c.doJSON(ctx, "POST", "/v1/plans/"+esc(pln)+"/"+esc(decision), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
