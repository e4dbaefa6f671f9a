package main

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cuvmm/cuvmm/nvml"
)

// gfdCliqueLabel is the label GPU feature discovery sets from the same rule; vmmprobe
// writes it only when asked (--label-nvidia-clique), for nodes where neither GFD nor the
// DRA kubelet plugin does.
const gfdCliqueLabel = "nvidia.com/gpu.clique"

// sharedCliqueID is the clique id that racks with nothing to do with each other report
// alike (meta-pytorch/torchcomms #3612): only the cluster UUID tells their NVLink domains
// apart.
const sharedCliqueID = 32766

// cliqueVerdict is the node's NVLink clique, computed by GPU feature discovery's rule
// (k8s-device-plugin internal/lm/imex.go over go-nvlib's IsFabricAttached): a GPU counts
// when NVML reports its fabric state COMPLETED, its status SUCCESS and a cluster UUID
// other than zero; the value is the cluster UUID (lower-case, canonical form), a dot and the
// clique id in decimal, when every counted GPU has the same cluster UUID and every one the
// same clique id; otherwise, and when no GPU counts, there is no label.
type cliqueVerdict struct {
	// Value is the label's value; "" when GFD would set no label (Why says why).
	Value string `json:"value,omitempty"`
	Why   string `json:"why"`
	// GPUs are NVML's indexes of the GPUs that counted.
	GPUs []int `json:"gpus"`
	// Unique is false when the clique id is one that unrelated racks share (32766): the
	// label, which carries the cluster UUID too, still tells them apart; a clique id alone
	// does not.
	Unique bool `json:"unique"`
}

// cliqueOf applies GFD's rule to NVML's GPUs, in NVML's order.
func cliqueOf(nv nvml.Node) cliqueVerdict {
	v := cliqueVerdict{GPUs: []int{}}
	if nv.Unavailable != "" {
		v.Why = "NVML is unavailable, so no GPU's fabric can be read"
		return v
	}
	clusters, cliques := map[string][]int{}, map[string][]int{}
	for _, g := range nv.GPUs {
		f := g.Fabric
		if !f.Known() {
			// go-nvlib: a GPU without the call or without fabric support is not attached;
			// any other error fails GFD's labelling, which sets no label then.
			if f.Code == nvml.ERROR_NOT_SUPPORTED || f.Code == nvml.ERROR_FUNCTION_NOT_FOUND {
				continue
			}
			v.Why = "NVML could not read GPU " + strconv.Itoa(g.Index) + "'s fabric (" + f.Why + "), which stops GFD's labelling"
			return v
		}
		fi := f.Value
		if fi.State != nvml.GPU_FABRIC_STATE_COMPLETED || fi.ClusterUUID == zeroCluster || fi.ClusterUUID == "" || fi.Status != nvml.SUCCESS {
			continue
		}
		cluster, clique := strings.ToLower(fi.ClusterUUID), strconv.FormatUint(uint64(fi.CliqueID), 10)
		clusters[cluster] = append(clusters[cluster], g.Index)
		cliques[clique] = append(cliques[clique], g.Index)
		v.GPUs = append(v.GPUs, g.Index)
	}
	switch {
	case len(v.GPUs) == 0:
		v.Why = "no GPU has completed fabric registration with success in a cluster (a non-zero cluster UUID)"
	case len(clusters) > 1:
		v.Why = "the GPUs disagree on the cluster UUID: " + groups(clusters)
	case len(cliques) > 1:
		v.Why = "the GPUs disagree on the clique id: " + groups(cliques)
	default:
		cluster, clique := slices.Collect(maps.Keys(clusters))[0], slices.Collect(maps.Keys(cliques))[0]
		v.Value = cluster + "." + clique
		v.Unique = clique != strconv.Itoa(sharedCliqueID)
		v.Why = "GPUs " + joinInts(v.GPUs) + " are in cluster " + cluster + ", clique " + clique
		if !v.Unique {
			v.Why += "; clique id " + clique + " is reported by unrelated racks alike: only cluster UUID and clique id together identify an NVLink domain"
		}
	}
	return v
}

// groups writes which GPUs reported which value: "a (GPUs 0,1), b (GPUs 2)".
func groups(m map[string][]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" (GPUs "+joinInts(m[k])+")")
	}
	return strings.Join(parts, ", ")
}
