# Differential POSIX conformance (Tests/mount/conformance): each area's system-call
# sequences run in a folder of the local disk and in a folder of a mount; every step must
# give the same outcome, except the differences listed, with their reasons, in
# conformance/known-differences.

test_conformance_matches_a_local_disk() {
    # Other users reach the mount (the owners area runs steps as uid 1000), and the kernel
    # checks permissions as it does on a local disk.
    mount_device a allow_other,default_permissions,acl
    python3 "$REPO/Tests/mount/conformance/compare.py" "$T/native" "$T/a" > "$T/conformance" \
        || { cat "$T/conformance"; false; }
    echo "    measured: $(tail -n1 "$T/conformance")"
}
