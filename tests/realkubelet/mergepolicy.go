package main

// The Topology Manager's merge, counted and timed, and for a merge too large to wait for, the
// same answer reached without enumerating every permutation.
//
// HintMerger.Merge (topologymanager/policy.go) folds HintMerger.compare over mergePermutation
// of every permutation of the providers' hint lists: the product of their lengths, up to 255
// per resource on 8 NUMA nodes, so four aligned resources make 4.2e9 permutations (tens of
// minutes on this machine) and five make days. The policy here wraps the release's own policy:
//
//   - a merge of at most mergeLimit permutations is the policy's own Merge, timed;
//   - a larger one is the policy's own steps (filterProvidersHints, filterSingleNumaHints for
//     single-numa-node, NewHintMerger, the admit rule), with Merge's loop replaced by
//     reducedMerge, which calls the kubelet's own mergePermutation and compare;
//   - a merge of at most mergeCheck permutations runs both and records whether they agree, so
//     every run checks the reduction against the kubelet's loop on its smaller merges.
//
// reducedMerge rests on two facts of policy.go, both checked by that comparison:
// mergePermutation's answer depends on a permutation only through (the AND of its masks,
// whether every hint so far is preferred with the same mask as the first, that first mask), so
// permutations with the same such state need one representative; and compare is a total
// preorder (preferred first; among preferred the narrowest, or closest, then the lowest mask;
// among non-preferred the width BestNonPreferredAffinityCount, then narrower ones from the
// widest down, then wider ones from the narrowest up, ties as among preferred), so the fold's
// result does not depend on how often, or in which order, a merged hint comes.

import (
	"math"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"
)

//go:linkname mergePermutation k8s.io/kubernetes/pkg/kubelet/cm/topologymanager.mergePermutation
func mergePermutation(defaultAffinity bitmask.BitMask, permutation []topologymanager.TopologyHint) topologymanager.TopologyHint

//go:linkname hintMergerCompare k8s.io/kubernetes/pkg/kubelet/cm/topologymanager.HintMerger.compare
func hintMergerCompare(m topologymanager.HintMerger, current, candidate *topologymanager.TopologyHint) *topologymanager.TopologyHint

//go:linkname filterSingleNumaHints k8s.io/kubernetes/pkg/kubelet/cm/topologymanager.filterSingleNumaHints
func filterSingleNumaHints(allResourcesHints [][]topologymanager.TopologyHint) [][]topologymanager.TopologyHint

// mergeRecord is one merge of an admission, as the admit reply reports it.
type mergeRecord struct {
	// the hint lists' lengths, as the merger iterates them, and their product
	Lists        []int   `json:"lists"`
	Permutations float64 `json:"permutations"`
	// how long the merge took: the policy's own Merge, or reducedMerge when Reduced
	Seconds float64 `json:"seconds"`
	Reduced bool    `json:"reduced"`
	// both ran (at most mergeCheck permutations): the reduction's answer was the kubelet's
	Checked     bool    `json:"checked"`
	Agreed      bool    `json:"agreed"`
	CheckedSecs float64 `json:"reduced_seconds,omitempty"`
	Hint        []int   `json:"hint"`
	Preferred   bool    `json:"preferred"`
	Admit       bool    `json:"admit"`
}

// countingPolicy wraps the release's policy (best-effort, restricted or single-numa-node).
type countingPolicy struct {
	inner      topologymanager.Policy
	numaInfo   *topologymanager.NUMAInfo
	opts       topologymanager.PolicyOptions
	mergeLimit float64
	mergeCheck float64

	mu      sync.Mutex
	records []mergeRecord
}

// wrapPolicy puts a countingPolicy in place of the manager's policy (the scope's unexported
// field; the manager has no setter). Policy none has no scope policy: nothing to wrap.
func wrapPolicy(tm topologymanager.Manager, limit, check float64) *countingPolicy {
	scope := reflect.ValueOf(tm).Elem().FieldByName("scope")
	if !scope.IsValid() || scope.IsNil() {
		return nil
	}
	inner := scope.Elem().Elem().FieldByName("scope")
	if !inner.IsValid() {
		return nil
	}
	field := inner.FieldByName("policy")
	if !field.IsValid() || field.IsNil() {
		return nil
	}
	policyField := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem()
	original := policyField.Interface().(topologymanager.Policy)
	p := &countingPolicy{inner: original, mergeLimit: limit, mergeCheck: check}
	if !readPolicyFields(reflect.ValueOf(original).Elem(), p) {
		return nil
	}
	policyField.Set(reflect.ValueOf(topologymanager.Policy(p)))
	return p
}

// readPolicyFields finds numaInfo and opts in the policy's struct (restricted embeds
// best-effort's).
func readPolicyFields(v reflect.Value, p *countingPolicy) bool {
	for i := 0; i < v.NumField(); i++ {
		field := v.Field(i)
		readable := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem()
		switch v.Type().Field(i).Name {
		case "numaInfo":
			p.numaInfo = readable.Interface().(*topologymanager.NUMAInfo)
		case "opts":
			p.opts = readable.Interface().(topologymanager.PolicyOptions)
		default:
			if field.Kind() == reflect.Struct {
				readPolicyFields(field, p)
			}
		}
	}
	return p.numaInfo != nil
}

func (p *countingPolicy) Name() string { return p.inner.Name() }

// takeRecords returns the merges since the last call.
func (p *countingPolicy) takeRecords() []mergeRecord {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	records := p.records
	p.records = nil
	return records
}

// merge is Merge for every release: filtered is filterProvidersHints' result, own runs the
// release policy's own Merge.
func (p *countingPolicy) merge(filtered [][]topologymanager.TopologyHint,
	own func() (topologymanager.TopologyHint, bool)) (topologymanager.TopologyHint, bool) {
	lists := filtered
	single := p.inner.Name() == topologymanager.PolicySingleNumaNode
	if single {
		lists = filterSingleNumaHints(filtered)
	}
	record := mergeRecord{Permutations: 1}
	for _, hints := range lists {
		record.Lists = append(record.Lists, len(hints))
		record.Permutations *= float64(len(hints))
	}
	var hint topologymanager.TopologyHint
	var admit bool
	started := time.Now()
	if record.Permutations <= p.mergeLimit || p.mergeLimit <= 0 {
		hint, admit = own()
		record.Seconds = time.Since(started).Seconds()
		if record.Permutations <= p.mergeCheck {
			startedReduced := time.Now()
			reduced, reducedAdmit := p.reduced(lists, single)
			record.CheckedSecs = time.Since(startedReduced).Seconds()
			record.Checked = true
			record.Agreed = sameHint(hint, reduced) && admit == reducedAdmit
		}
	} else {
		hint, admit = p.reduced(lists, single)
		record.Seconds = time.Since(started).Seconds()
		record.Reduced = true
	}
	if hint.NUMANodeAffinity != nil {
		record.Hint = hint.NUMANodeAffinity.GetBits()
	}
	record.Preferred, record.Admit = hint.Preferred, admit
	p.mu.Lock()
	p.records = append(p.records, record)
	p.mu.Unlock()
	return hint, admit
}

// reduced is the policy's Merge (policy_best_effort.go, policy_restricted.go,
// policy_single_numa_node.go) with reducedMerge for HintMerger.Merge.
func (p *countingPolicy) reduced(lists [][]topologymanager.TopologyHint, single bool) (topologymanager.TopologyHint, bool) {
	merger := topologymanager.NewHintMerger(p.numaInfo, lists, p.inner.Name(), p.opts)
	best := reducedMerge(merger)
	if single && best.NUMANodeAffinity.IsEqual(p.numaInfo.DefaultAffinityMask()) {
		best = topologymanager.TopologyHint{NUMANodeAffinity: nil, Preferred: best.Preferred}
	}
	// canAdmitPodResult: best-effort admits every hint, restricted and single-numa-node a
	// preferred one
	admit := p.inner.Name() == topologymanager.PolicyBestEffort || best.Preferred
	return best, admit
}

// mergeState is what mergePermutation keeps of a permutation's first hints: with every hint so
// far preferred and of the first mask, that mask (and none before a first mask); otherwise the
// AND of the masks so far.
type mergeState struct {
	preferred bool
	hasFirst  bool
	mask      uint64
}

func maskKey(mask bitmask.BitMask) uint64 {
	var key uint64
	for _, bit := range mask.GetBits() {
		key |= 1 << uint(bit)
	}
	return key
}

// reducedMerge is HintMerger.Merge over one representative permutation per mergeState, taken
// in the order the kubelet's loop first reaches each state, folded with the kubelet's compare.
func reducedMerge(m topologymanager.HintMerger) topologymanager.TopologyHint {
	defaultAffinity := m.NUMAInfo.DefaultAffinityMask()
	full := maskKey(defaultAffinity)
	type entry struct {
		state mergeState
		hints []topologymanager.TopologyHint
	}
	frontier := []entry{{state: mergeState{preferred: true, mask: full}}}
	for _, resourceHints := range m.Hints {
		seen := map[mergeState]bool{}
		var next []entry
		for _, e := range frontier {
			for _, hint := range resourceHints {
				s := e.state
				if hint.NUMANodeAffinity != nil {
					key := maskKey(hint.NUMANodeAffinity)
					switch {
					case s.preferred && !s.hasFirst:
						s.hasFirst, s.mask = true, key&full
					case s.preferred && s.mask != key&full:
						s.preferred = false
						s.mask &= key
					case !s.preferred:
						s.mask &= key
					}
				}
				if !hint.Preferred && s.preferred {
					s.preferred = false
				}
				if !s.preferred {
					s.hasFirst = false
				}
				if seen[s] {
					continue
				}
				seen[s] = true
				hints := append(append([]topologymanager.TopologyHint(nil), e.hints...), hint)
				next = append(next, entry{s, hints})
			}
		}
		frontier = next
	}
	var best *topologymanager.TopologyHint
	for _, e := range frontier {
		merged := mergePermutation(defaultAffinity, e.hints)
		best = hintMergerCompare(m, best, &merged)
	}
	if best == nil {
		return topologymanager.TopologyHint{NUMANodeAffinity: defaultAffinity, Preferred: false}
	}
	return *best
}

func sameHint(a, b topologymanager.TopologyHint) bool {
	if a.Preferred != b.Preferred || (a.NUMANodeAffinity == nil) != (b.NUMANodeAffinity == nil) {
		return false
	}
	return a.NUMANodeAffinity == nil || a.NUMANodeAffinity.IsEqual(b.NUMANodeAffinity)
}

// mergeSeconds sums the records' times (the admission's time in the merge).
func mergeSeconds(records []mergeRecord) float64 {
	total := 0.0
	for _, r := range records {
		total += r.Seconds
	}
	return math.Round(total*1e6) / 1e6
}

// mergeSettings are the node description's fields for the merge (kubelet.merge_limit,
// kubelet.merge_check): 0 for merge_limit runs every merge as the kubelet does.
type mergeSettings struct {
	MergeLimit float64 `json:"merge_limit"`
	MergeCheck float64 `json:"merge_check"`
}
