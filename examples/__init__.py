"""Examples that are not part of the product (tools for the example agents in configs/)."""
