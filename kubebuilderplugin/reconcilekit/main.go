package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "reconcilekit plugin:", err)
		os.Exit(1)
	}
}

// serve answers one request read from in on out.
func serve(in io.Reader, out io.Writer) error {
	var req request
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("reading kubebuilder's request: %w", err)
	}
	return json.NewEncoder(out).Encode(handle(req))
}

// handle runs one command of kubebuilder's protocol. A failure is an answer
// with Error set, which kubebuilder prints and stops on.
func handle(req request) response {
	res := response{APIVersion: "v1alpha1", Command: req.Command, Universe: map[string]string{}}
	var err error
	switch req.Command {
	case "metadata":
		res.Metadata = help(req.Args)
	case "flags":
		// No flags of its own: create api's --group, --version and --kind
		// are kubebuilder's.
	case "init", "edit":
		res.Universe, err = requireKit(req.Universe)
	case "create api":
		res.Universe, err = createAPI(req)
	case "create webhook":
		res.Universe, err = createWebhook(req)
	default:
		err = fmt.Errorf("unknown command %q", req.Command)
	}
	if err != nil {
		res.Error, res.ErrorMsgs = true, []string{"reconcilekit plugin: " + err.Error()}
		res.Universe = nil
	}
	return res
}

// help describes a subcommand.
func help(args []string) metadata {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "--init", "--edit":
		return metadata{
			Description: "Require reconcilekit " + Version + " in go.mod, so that the APIs created next get reconcilekit controllers.",
			Examples:    "kubebuilder init --plugins go/v4,reconcilekit/v1-alpha --domain example.com --repo example.com/site-operator",
		}
	case "--webhook":
		return metadata{
			Description: "Serve the webhooks go/v4 scaffolds with reconcilekit's webhookkit: typed functions, every failing field in one 422, " +
				"ratcheting updates, and tests through the API server.",
			Examples: "kubebuilder create webhook --group web --version v1 --kind Site --defaulting --programmatic-validation",
		}
	case "--api":
		return metadata{
			Description: "Make the controller go/v4 scaffolds a reconcilekit reconciler: a Deployment applied and waited for, " +
				"a cleanup step under a finalizer, kstatus conditions on the status, and tests that a converged pass writes nothing.",
			Examples: "kubebuilder create api --group web --version v1 --kind Site --resource --controller",
		}
	}
	return metadata{Description: "reconcilekit controllers for kubebuilder projects."}
}
