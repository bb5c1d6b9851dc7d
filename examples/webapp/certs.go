package main

import (
	"flag"

	ctrl "sigs.k8s.io/controller-runtime"
)

// certFlags choose how the webhook server gets its serving certificate.
type certFlags struct {
	dir string
}

func (c *certFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.dir, "webhook-cert-dir", "", "Directory of the webhook serving certificate (tls.crt, tls.key).")
}

func (c *certFlags) setup(mgr ctrl.Manager, namespace string) error { return nil }
