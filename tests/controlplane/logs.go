package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
)

// setUpLogs sends klog (the API server's logs) to stderr at the verbosity given, or nowhere.
func setUpLogs(verbosity int) {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("v", fmt.Sprint(verbosity))
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("alsologtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	if verbosity > 0 {
		klog.SetOutput(os.Stderr)
	} else {
		klog.SetOutput(io.Discard)
	}
}

// gitVersion is what /version answers: set at link time (build.sh), v0.0.0 otherwise, which
// helm refuses for a chart with a kubeVersion.
func gitVersion() string { return version.Get().GitVersion }
