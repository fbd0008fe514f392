package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

func webhookRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/webhooks", Tag: "webhooks", Summary: "Create a completion webhook (admin): a URL that receives a signed POST (Standard Webhooks) when a turn or a routine run finishes. The answer carries the signing secret, shown this once.",
			Body: "WebhookCreate", Resp: "WebhookCreated", Status: 201, handle: (*Server).createWebhook},
		{Method: "GET", Path: "/v1/webhooks", Tag: "webhooks", Summary: "List the webhooks (admin); secrets are never shown again.",
			Resp: "WebhookList", Status: 200, handle: (*Server).listWebhooks},
		{Method: "GET", Path: "/v1/webhooks/{whk}", Tag: "webhooks", Summary: "Get a webhook (admin).",
			Resp: "Webhook", Status: 200, handle: (*Server).getWebhook},
		{Method: "DELETE", Path: "/v1/webhooks/{whk}", Tag: "webhooks", Summary: "Delete a webhook and its deliveries (admin).",
			Status: 204, handle: (*Server).deleteWebhook},
		{Method: "GET", Path: "/v1/webhooks/{whk}/deliveries", Tag: "webhooks", Summary: "A webhook's deliveries, newest first: status, attempts, next attempt, last status and error (admin).",
			Query: []param{{Name: "limit", Type: "integer", Doc: "page size (default 100, at most 500)"}},
			Resp:  "WebhookDeliveryList", Status: 200, handle: (*Server).listWebhookDeliveries},
		{Method: "GET", Path: "/v1/webhooks/{whk}/deliveries/{whd}", Tag: "webhooks", Summary: "One delivery with its payload and the log of its attempts (admin).",
			Resp: "WebhookDelivery", Status: 200, handle: (*Server).getWebhookDelivery},
		{Method: "POST", Path: "/v1/webhooks/{whk}/deliveries/{whd}/redeliver", Tag: "webhooks", Summary: "Send a delivery again now, with the same id (admin).",
			Resp: "WebhookDelivery", Status: 200, handle: (*Server).redeliverWebhook},
	}
}

func (s *Server) webhooks() (desk.WebhookService, error) {
	if s.Webhooks == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "webhooks are not available on this desk")
	}
	return s.Webhooks, nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	var in struct {
		desk.WebhookCreate
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	h, err := svc.Create(r.Context(), in.WebhookCreate)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, h)
	return nil
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	hs, err := svc.List(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.WebhookList{Webhooks: nonNil(hs)})
	return nil
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	id, err := pathID(r, "whk", desk.PrefixWebhook)
	if err != nil {
		return err
	}
	h, err := svc.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	id, err := pathID(r, "whk", desk.PrefixWebhook)
	if err != nil {
		return err
	}
	if err := svc.Delete(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listWebhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	id, err := pathID(r, "whk", desk.PrefixWebhook)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit")
	if err != nil {
		return err
	}
	ds, err := svc.Deliveries(r.Context(), id, int(limit))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.WebhookDeliveryList{Deliveries: nonNil(ds)})
	return nil
}

func deliveryPath(r *http.Request) (hook, delivery string, err error) {
	if hook, err = pathID(r, "whk", desk.PrefixWebhook); err != nil {
		return "", "", err
	}
	delivery, err = pathID(r, "whd", desk.PrefixWebhookDelivery)
	return hook, delivery, err
}

func (s *Server) getWebhookDelivery(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	hook, id, err := deliveryPath(r)
	if err != nil {
		return err
	}
	d, err := svc.Delivery(r.Context(), hook, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) redeliverWebhook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.webhooks()
	if err != nil {
		return err
	}
	hook, id, err := deliveryPath(r)
	if err != nil {
		return err
	}
	d, err := svc.Redeliver(r.Context(), hook, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}
