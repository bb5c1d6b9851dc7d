package main

// The external plugin protocol of kubebuilder v4 (its
// pkg/plugin/external types, apiVersion v1alpha1), declared here so that
// the plugin depends on nothing.

// request is what kubebuilder sends.
type request struct {
	APIVersion  string            `json:"apiVersion"`
	Args        []string          `json:"args"`
	Command     string            `json:"command"`
	Universe    map[string]string `json:"universe"`
	PluginChain []string          `json:"pluginChain,omitempty"`
	Config      map[string]any    `json:"config,omitempty"`
}

// response is what the plugin answers: the files to write.
type response struct {
	APIVersion string            `json:"apiVersion"`
	Command    string            `json:"command"`
	Metadata   metadata          `json:"metadata"`
	Universe   map[string]string `json:"universe"`
	Error      bool              `json:"error,omitempty"`
	ErrorMsgs  []string          `json:"errorMsgs,omitempty"`
	Flags      []flag            `json:"flags,omitempty"`
}

// metadata is a subcommand's help.
type metadata struct {
	Description string `json:"Description"`
	Examples    string `json:"Examples"`
}

// flag is a flag the plugin accepts.
type flag struct {
	Name    string `json:"Name"`
	Type    string `json:"Type"`
	Default string `json:"Default"`
	Usage   string `json:"Usage"`
}
