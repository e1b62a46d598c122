// Package buyer is the buyers' side of the contract on the wire: the JSON
// bodies of the HTTP API of SPEC section 6 (jobs, their attempts, outputs
// and journal, the pages that list them, uploaded inputs) and the API's
// own error codes.
//
// It is the one definition of those bodies: the control plane's API
// (server/api) encodes them, the buyers' client (package client) decodes
// them, and the harness reads them through that client. Like package
// protocol, which holds the devices' frames, it imports the standard
// library and protocol alone, so a buyer's program links no server code.
//
// A change to a type here is a change to the wire: the field names and
// their omitempty are the contract.
package buyer
