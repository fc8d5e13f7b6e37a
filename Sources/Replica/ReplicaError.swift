import BlobStore
import ContainerFormat

/// Errors of the replica layer; each wraps its cause from the layer below.
public enum ReplicaError: Error, Sendable {
    case store(StoreError)
}
