// Store: everything one deployment stores — the states (state_store.h),
// the documents they are computed from (document_catalog.h) and the
// administration of both (store_admin.h) — behind one object, so a server
// opens, shares and closes one thing. Code that needs only one part takes
// that interface.
#ifndef TWICE_STORAGE_STORE_H_
#define TWICE_STORAGE_STORE_H_

#include "storage/document_catalog.h"
#include "storage/state_store.h"
#include "storage/store_admin.h"

namespace twice::storage {

class Store : public StateStore, public DocumentCatalog, public StoreAdmin {
 public:
  ~Store() override = default;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_STORE_H_
