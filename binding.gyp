{
  "targets": [
    {
      "target_name": "cni_driver_netlink",
      "sources": ["native/netlink/netlink.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "cni_driver_spawn",
      "sources": ["native/spawn/spawn.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "cni_driver_flock",
      "sources": ["native/flock/flock.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "cni_driver_nftables",
      "sources": ["native/nftables/nftables.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "libraries": ["-ldl", "-lpthread"]
    },
    {
      "target_name": "cni_driver_conntrack",
      "sources": ["native/conntrack/conntrack.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "cni_driver_memory",
      "sources": ["native/memory/memory.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
